/**
 * The planner hints ("+"-joined) of the fastest decode variant for this program on this adapter, or null
 * when the program has no few-row int8 linears or is too large to upload once per candidate.
 * Nothing here reads a program file: each candidate's executor streams it again as the load
 * does (a streamed file is never held whole), and the choice is cached under the planner's
 * fingerprint of the program (what its reader read: the same for every hint).
 * @param {{files: (ArrayBuffer | object)[], method: string, fusion: string, device: string,
 *   spec: {hints: string[], families: string[], calls: number, max_bytes: number},
 *   plan: (hint: string) => Promise<{plan: object, fingerprint: string}>,
 *   build: (parsed: object) => Promise<object>,
 *   emit: (e: object) => void}} args `plan` plans the program with these hints more, `build`
 *   makes an executor of a parsed plan; `files`: the .pte then each external data file, in
 *   memory or streamed (web/sources.js)
 * @returns {Promise<{hint: string, times_ms: Record<string, number>, calls: number,
 *   measured: string, cached: boolean} | null>}
 */
export function tuneDecode({ files, method, fusion, device, spec, plan, build, emit }: {
    files: (ArrayBuffer | object)[];
    method: string;
    fusion: string;
    device: string;
    spec: {
        hints: string[];
        families: string[];
        calls: number;
        max_bytes: number;
    };
    plan: (hint: string) => Promise<{
        plan: object;
        fingerprint: string;
    }>;
    build: (parsed: object) => Promise<object>;
    emit: (e: object) => void;
}): Promise<{
    hint: string;
    times_ms: Record<string, number>;
    calls: number;
    measured: string;
    cached: boolean;
} | null>;
