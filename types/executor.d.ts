/**
 * A Plan made real on one GPUDevice. Make it with `Executor.create`.
 */
export class Executor {
    /**
     * Create every buffer, pipeline and bind group of `plan` and upload its constants.
     * @param {string | object} plan Plan.to_json() text or object
     * @param {ArrayBuffer | ArrayBufferView | object | Array<ArrayBuffer | ArrayBufferView | object> | null} fileBytes
     *   the program file (constant ranges are uploaded from it directly), or a list: the program
     *   file, then each external data file (`.ptd`) in the order the plan was made with (a file
     *   init's `file` indexes it); null if the plan has no file-initialised buffers. A file may
     *   be a streamed source (web/sources.js: `{name, size, chunks()}`): its constants are then
     *   written as its chunks arrive (web/upload.js), and no file is held whole
     * @param {{device?: GPUDevice, gpu?: GPU, poison?: boolean, onStage?: (stage: string) => void,
     *   onBytes?: (file: number, n: number) => void}} [options]
     *   `device` to share one device between programs; `poison` fills activations/outputs with
     *   NaNs (tests); `onStage('compile')` is called when the uploads are issued and the kernels
     *   start compiling; `onBytes` counts the bytes of streamed files as they arrive
     * @returns {Promise<Executor>}
     * @throws {PlanError | AdapterError | ExternalDataError | InputError} InputError: a streamed
     *   file ended early or changed
     */
    static create(plan: string | object, fileBytes: ArrayBuffer | ArrayBufferView | object | Array<ArrayBuffer | ArrayBufferView | object> | null, { device, gpu, poison, onStage, onBytes }?: {
        device?: GPUDevice;
        gpu?: GPU;
        poison?: boolean;
        onStage?: (stage: string) => void;
        onBytes?: (file: number, n: number) => void;
    }): Promise<Executor>;
    /** @private */
    private constructor();
    plan: any;
    device: any;
    buffers: any[];
    pipelines: any[];
    bindGroups: any[];
    /** @private the plan's dispatches as a compute pass's commands (#commands) */
    private pass;
    staging: any[];
    /** @type {Map<number, {spec: object, bindGroups: GPUBindGroup[], pass: object, staging: GPUBuffer}>} k -> readout */
    readouts: Map<number, {
        spec: object;
        bindGroups: GPUBindGroup[];
        pass: object;
        staging: GPUBuffer;
    }>;
    inputRing: any;
    /** What calls did since load: submits, and bytes read back from the GPU. */
    counters: {
        submits: number;
        readBytes: number;
    };
    lost: any;
    disposed: boolean;
    timings: {
        buffers_ms: number;
        pipelines_ms: number;
        bind_groups_ms: number;
        streamed: boolean;
        largest_held: number;
        largest_chunk: number;
        largest_piece: number;
    };
    tail: Promise<void>;
    /** Method inputs: `[{buffer, dtype, shape, storage, name}]`. */
    get inputs(): any;
    /** Method outputs: `[{buffer, dtype, shape, storage, name}]`. */
    get outputs(): any;
    /**
     * Run one call: write `inputs`, dispatch the whole plan in one compute pass, read the
     * outputs (or, with `readout: k`, only the words of the plan's readout of k: k token ids
     * then k float32 logits as bits; the id alone for k = 1). Calls are serialised; state (KV
     * caches) persists until `reset()`.
     * @param {Array<ArrayBufferView | {data: ArrayBufferView, shape: number[]}>} inputs in the
     *   method's order (see `inputs`); int64 inputs may be BigInt64Array (narrowed to int32)
     * @param {{readout?: number | null}} [options]
     * @returns {Promise<ArrayBufferView[] | Uint32Array>} one TypedArray per output, of the
     *   output's dtype; the readout's words with `readout`
     * @throws {InputError | DeviceLostError | DisposedError | PlanError}
     */
    run(inputs: Array<ArrayBufferView | {
        data: ArrayBufferView;
        shape: number[];
    }>, { readout }?: {
        readout?: number | null;
    }): Promise<ArrayBufferView[] | Uint32Array>;
    /**
     * Run several calls in order in one submit (a prompt's windows, which depend on each other
     * only through state); gives what `run` gives for the last one.
     * @param {Array<Array<ArrayBufferView | {data: ArrayBufferView, shape: number[]}>>} calls
     * @param {{readout?: number | null}} [options]
     * @returns {Promise<ArrayBufferView[] | Uint32Array>}
     * @throws {InputError | DeviceLostError | DisposedError | PlanError}
     */
    runCalls(calls: Array<Array<ArrayBufferView | {
        data: ArrayBufferView;
        shape: number[];
    }>>, { readout }?: {
        readout?: number | null;
    }): Promise<ArrayBufferView[] | Uint32Array>;
    /**
     * Zero the persistent state (KV caches), after the calls already made.
     * @returns {Promise<void>}
     */
    reset(): Promise<void>;
    /** Fill activation and output buffers with a NaN pattern (tests: catches unwritten elements). */
    poison(word?: number): void;
    /** Free every GPU resource of this program (the device stays, it may be shared). */
    dispose(): void;
    uncaptured: any;
    #private;
}
