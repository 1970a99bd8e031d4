/**
 * Byte accounting of one stage ('fetch' or 'verify') over many files; emits
 * `{stage, file, loaded, total, fileLoaded, fileTotal, etaSeconds}` at most every
 * `intervalMs` (and always when a file completes).
 */
export class Progress {
    /**
     * @param {(event: object) => void} emit
     * @param {{stage?: string, intervalMs?: number, now?: () => number}} [options] `now` in ms
     */
    constructor(emit: (event: object) => void, { stage, intervalMs, now }?: {
        stage?: string;
        intervalMs?: number;
        now?: () => number;
    });
    emit: (event: object) => void;
    stage: string;
    intervalMs: number;
    now: () => number;
    /** @type {Map<string, {loaded: number, total: number}>} */
    files: Map<string, {
        loaded: number;
        total: number;
    }>;
    loaded: number;
    networkBytes: number;
    networkStart: any;
    lastEmit: number;
    /** Bytes of every file known so far (0 for a file whose size is not known yet). */
    get total(): number;
    /** Announce a file and its size (0 if unknown). @param {string} file @param {number} total */
    expect(file: string, total: number): void;
    /**
     * Count `bytes` more of `file`; `network` says they came over the network (they set the
     * rate behind the ETA).
     * @param {string} file @param {number} bytes @param {{network?: boolean}} [options]
     */
    add(file: string, bytes: number, { network }?: {
        network?: boolean;
    }): void;
    /** Mark `file` done (its size becomes what was counted) and emit. @param {string} file */
    finish(file: string): void;
    /**
     * Seconds left at the network rate seen so far: null before any network byte, 0 when
     * every known byte is in.
     * @returns {number | null}
     */
    etaSeconds(): number | null;
    /** The event this progress would emit now for `file`. @param {string} file */
    event(file: string): {
        stage: string;
        file: string;
        loaded: number;
        total: number;
        fileLoaded: number;
        fileTotal: number;
        etaSeconds: number;
    };
    #private;
}
