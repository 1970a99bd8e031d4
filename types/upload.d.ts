/** int64 file bytes as int32 words; a value outside int32 is a PlanError, not a wrap. */
export function narrowI64(src: any, label: any): Uint8Array<ArrayBuffer>;
/** A file init's bytes (the parts back to back) -> what its buffer holds, padded to 4 bytes. */
export function convertInit(init: any, src: any, label: any): any;
/** Write `src` to `target` at `offset` in writes of at most UPLOAD_CHUNK bytes (all multiples of 4). */
export function writeChunked(queue: any, target: any, offset: any, src: any): void;
/**
 * Initialise buffer `target` of plan buffer `b` from its init: zeros, words, or file bytes
 * (`files`: each file's bytes in memory, the program's first), converted as the init says.
 */
export function initialise(device: any, target: any, b: any, files: any): void;
/** The most bytes of constants the loader held at once (tests and stats read it). */
export class HeldMeter {
    now: number;
    peak: number;
    /** the largest file chunk, and the largest whole-tensor piece (with its converted copy) */
    chunk: number;
    piece: number;
    /** @param {number} n @param {'chunk' | 'piece'} [kind] */
    hold(n: number, kind?: "chunk" | "piece"): void;
    release(n: any): void;
}
/**
 * Streams the file inits of a plan's buffers into them. `feed(file, offset, bytes)` takes
 * each file's chunks in file order; `finish()` checks every init got all its bytes.
 */
export class StreamedUpload {
    /**
     * @param {GPUDevice} device @param {GPUBuffer[]} buffers the plan's, by id
     * @param {object[]} planBuffers plan.buffers @param {Set<number>} streamed file indexes that are streamed
     * @param {HeldMeter} meter
     */
    constructor(device: GPUDevice, buffers: GPUBuffer[], planBuffers: object[], streamed: Set<number>, meter: HeldMeter);
    queue: any;
    meter: HeldMeter;
    written: number;
    /** @type {Map<number, object[]>} file -> its segments, by file offset */
    segments: Map<number, object[]>;
    next: Map<number, number>;
    active: Map<number, any[]>;
    /**
     * Write the bytes of file `file` at `offset` (chunks arrive in file order) to the buffers
     * they initialise. Resolves once the queue took them (it waits for the queue every
     * DRAIN_EVERY bytes, so its staging stays bounded).
     * @param {number} file @param {number} offset @param {Uint8Array} bytes
     */
    feed(file: number, offset: number, bytes: Uint8Array): Promise<void>;
    /**
     * Check that every segment of `file` got its bytes (a file that ended early leaves some short).
     * @param {number} file @param {string} name for the message
     * @throws {InputError}
     */
    finish(file: number, name: string): void;
    #private;
}
