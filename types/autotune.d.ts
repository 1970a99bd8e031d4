/**
 * The planner hints ("+"-joined) of the fastest decode variant for this program on this adapter, or null
 * when the program has no few-row int8 linears or is too large to upload once per candidate.
 * @param {{bytes: ArrayBuffer, files?: ArrayBuffer[], method: string, fusion: string, device: string,
 *   spec: {hints: string[], families: string[], calls: number, max_bytes: number},
 *   plan: (hint: string) => Promise<object>, build: (parsed: object) => Promise<object>,
 *   emit: (e: object) => void}} args `plan` plans the program with these hints more (the plan
 *   JSON), `build` makes an executor of a parsed plan; `files`: the .pte's bytes then each
 *   external data file's (default: the .pte alone)
 * @returns {Promise<{hint: string, times_ms: Record<string, number>, calls: number,
 *   measured: string, cached: boolean} | null>}
 */
export function tuneDecode({ bytes, files, method, fusion, device, spec, plan, build, emit }: {
    bytes: ArrayBuffer;
    files?: ArrayBuffer[];
    method: string;
    fusion: string;
    device: string;
    spec: {
        hints: string[];
        families: string[];
        calls: number;
        max_bytes: number;
    };
    plan: (hint: string) => Promise<object>;
    build: (parsed: object) => Promise<object>;
    emit: (e: object) => void;
}): Promise<{
    hint: string;
    times_ms: Record<string, number>;
    calls: number;
    measured: string;
    cached: boolean;
} | null>;
