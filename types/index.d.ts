/**
 * Load one method of a `.pte` program: fetch it, plan it in Python, upload it to the GPU.
 * @param {string | URL | ArrayBuffer | ArrayBufferView | Blob} source a URL (fetched by the
 *   worker), the file's bytes (copied to the worker), or a File/Blob
 * @param {object} [options]
 * @param {string} [options.method] method name (default "forward")
 * @param {string | object} [options.plan] a plan made earlier (`Plan.to_json()`, e.g. cached by
 *   the file's sha256): skips Python entirely
 * @param {(event: {stage: string, loaded?: number, total?: number}) => void} [options.onProgress]
 *   stages: fetch, python, plan, autotune (with `autotune`, when it measures), upload, compile, ready
 * @param {boolean} [options.transfer] move an ArrayBuffer source to the worker instead of
 *   copying it (it is detached here afterwards; saves a copy of a large file)
 * @param {'all' | 'elementwise' | 'none'} [options.fusion] how much the planner fuses:
 *   everything (default), elementwise chains only, or nothing (one dispatch per op)
 * @param {boolean} [options.poison] fill activations/outputs with NaNs first (tests)
 * @param {boolean} [options.preflight] for a URL: plan from the file's flatbuffer ranges (HTTP
 *   Range requests) and check the device's limits before the file is downloaded (default true)
 * @param {'default' | Record<string, number> | null} [options.limits] 'default': plan for and
 *   create the device with WebGPU's default limits (weights past a 128 MiB binding are split);
 *   an object caps some WebGPU limits (camelCase names) the same way, and `deviceMemory` (a byte
 *   budget) is checked by the preflight (see loadModel)
 * @param {boolean} [options.autotune] time the decode kernel variants of a program with few-row
 *   int8 linears on this adapter (a few calls each, once: the choice is cached per adapter and
 *   program) and plan the fastest; `stats.autotune` tells which (null: nothing to tune)
 * @param {Array<string | URL | ArrayBuffer | ArrayBufferView | Blob>} [options.data] the external
 *   data files (`.ptd`) the program keeps constants in (ExecuTorch external constants), as URLs
 *   or bytes; a constant none of them holds is an ExternalDataError naming its key (a program
 *   with data files is not preflighted)
 * @param {number} [options.chunkBytes] bytes a streamed file is read in (HTTP Range requests of
 *   a preflighted URL, slices of a File/Blob; default 8 MiB): what the loader holds of the
 *   weights at once is about two chunks plus the largest tensor it converts. A URL is streamed
 *   into the GPU buffers; only an ArrayBuffer or TypedArray source is held whole
 * @returns {Promise<Program>}
 * @throws {PteFormatError | UnsupportedOpError | PlanError | AdapterError | AdapterLimitsError | InputError | ExternalDataError | WorkerError}
 */
export function loadProgram(source: string | URL | ArrayBuffer | ArrayBufferView | Blob, { method, plan, fusion, onProgress, transfer, poison, preflight, limits, autotune, data, chunkBytes }?: {
    method?: string;
    plan?: string | object;
    onProgress?: (event: {
        stage: string;
        loaded?: number;
        total?: number;
    }) => void;
    transfer?: boolean;
    fusion?: "all" | "elementwise" | "none";
    poison?: boolean;
    preflight?: boolean;
    limits?: "default" | Record<string, number> | null;
    autotune?: boolean;
    data?: Array<string | URL | ArrayBuffer | ArrayBufferView | Blob>;
    chunkBytes?: number;
}): Promise<Program>;
export { Executor } from "./executor.js";
export { requestDevice } from "./device.js";
export { parsePlan } from "./plan.js";
export { CACHE_NAME } from "./files.js";
/** @typedef {{dtype: string, shape: number[], storage: string, name: string}} TensorSpec */
/** A loaded method. Make it with `loadProgram`. */
export class Program {
    /** @private */
    private constructor();
    /** @private */
    private client;
    /** @private @type {number} */
    private handle;
    /** Method name. @type {string} */
    method: string;
    /** What run() takes. @type {TensorSpec[]} */
    inputs: TensorSpec[];
    /** What run() gives. @type {TensorSpec[]} */
    outputs: TensorSpec[];
    /** Positions of a windowed decoder's context, or null. @type {number | null} */
    maxContext: number | null;
    /** Load statistics: file_bytes, bytes_read_by_python, dispatches, *_ms timings. @type {Record<string, any>} */
    stats: Record<string, any>;
    disposed: boolean;
    /**
     * Run one call. Inputs are checked (count, element count or `{data, shape}` shape, dtype,
     * int64 range, context) before the GPU; state persists across calls until `reset()`.
     * @param {Array<ArrayBufferView | {data: ArrayBufferView, shape: number[]}>} inputs
     * @returns {Promise<ArrayBufferView[]>} one TypedArray per output (int64 -> BigInt64Array)
     * @throws {InputError | DeviceLostError | DisposedError}
     */
    run(inputs: Array<ArrayBufferView | {
        data: ArrayBufferView;
        shape: number[];
    }>): Promise<ArrayBufferView[]>;
    /** Zero persistent state (KV caches). @returns {Promise<void>} */
    reset(): Promise<void>;
    /** Free this program's GPU memory. @returns {Promise<void>} */
    dispose(): Promise<void>;
    #private;
}
export type TensorSpec = {
    dtype: string;
    shape: number[];
    storage: string;
    name: string;
};
export { WebpteError, PteFormatError, UnsupportedOpError, PlanError, InputError, AdapterError, NoWebGPUError, AdapterLimitsError, DeviceLostError, DisposedError, WorkerError, ContextFullError, TemplateError, ModelFolderError, HashMismatchError, QuotaError, ExternalDataError } from "./errors.js";
export { runtimeInfo, terminate } from "./client.js";
export { loadModel, Model, checkCapabilities } from "./model.js";
export { listCachedModels, hasModelInCache, deleteModelFromCache } from "./cache.js";
