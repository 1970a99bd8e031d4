/**
 * Parse (if a string) and validate a Plan. `fileSizes` (the .pte's size, then each external
 * data file's), or `fileSize` (the .pte alone), when given, bound file byte ranges: a file
 * init's `file` indexes them (0 or absent: the .pte).
 * @param {string | object} planOrJson Plan.to_json() text or its parsed object
 * @param {{fileSize?: number, fileSizes?: number[]}} [options]
 * @returns {object} the plan object (fields as in Python: buffers, kernels, dispatches, ...)
 * @throws {PlanError | ExternalDataError} ExternalDataError: a file init reads a data file
 *   that was not given
 */
export function parsePlan(planOrJson: string | object, { fileSize, fileSizes }?: {
    fileSize?: number;
    fileSizes?: number[];
}): object;
/**
 * Why an init's `interleave` cannot regroup `sourceBytes` bytes of file parts, or null
 * (py/webpte/plan/interleave.py check).
 * @param {any} spec
 * @param {number} sourceBytes
 * @returns {string | null}
 */
export function interleaveProblem(spec: any, sourceBytes: number): string | null;
/**
 * Bytes of a regrouped buffer.
 * @param {{row_bytes: number, rows: number, segments: number, group: number}} spec
 * @returns {number}
 */
export function interleavedBytes(spec: {
    row_bytes: number;
    rows: number;
    segments: number;
    group: number;
}): number;
/**
 * W rows regrouped for the few-row int8 kernel (py/webpte/plan/interleave.py): for each
 * group of `group` rows (the last one's missing rows repeat the last row), for each 16-byte
 * block, that block of the group's rows of each segment in turn.
 * @param {Uint8Array} src the file parts back to back: segments x rows x row_bytes
 * @param {{row_bytes: number, rows: number, segments: number, group: number}} spec
 * @returns {Uint8Array}
 */
export function interleaveRows(src: Uint8Array, spec: {
    row_bytes: number;
    rows: number;
    segments: number;
    group: number;
}): Uint8Array;
/**
 * Bytes of the program's files a buffer's init uploads (0 for zeros and words).
 * @param {{kind: string, nbytes?: number, parts?: {offset: number, nbytes: number}[]} | null | undefined} init
 * @returns {number}
 */
export function fileBytes(init: {
    kind: string;
    nbytes?: number;
    parts?: {
        offset: number;
        nbytes: number;
    }[];
} | null | undefined): number;
/**
 * A host input -> the bytes its buffer holds: Uint8Array padded to a multiple of 4 bytes.
 * `value` is a TypedArray (its length must be the method's element count) or
 * `{data: TypedArray, shape: number[]}` (the shape must match exactly). Integer inputs are
 * narrowed (int64 BigInt64Array -> int32) with a range check.
 * @param {ArrayBufferView | {data: ArrayBufferView, shape: number[]}} value
 * @param {{dtype: string, shape: number[], storage: string}} spec
 * @param {string} what e.g. "input 0", for messages
 * @returns {Uint8Array}
 * @throws {InputError}
 */
export function toStorage(value: ArrayBufferView | {
    data: ArrayBufferView;
    shape: number[];
}, spec: {
    dtype: string;
    shape: number[];
    storage: string;
}, what: string): Uint8Array;
/**
 * Bytes read back from an output buffer -> the host TypedArray of the output's dtype
 * (int64 outputs come back as BigInt64Array, bool as Uint8Array of 0/1). Kernels write a bool
 * as the word 0 or 1: any other word (the executor's poison) is an element none wrote.
 * @param {ArrayBuffer} raw at least storageBytes(spec) bytes
 * @param {{dtype: string, shape: number[], storage: string, name?: string}} spec
 * @returns {ArrayBufferView}
 * @throws {PlanError} a bool word that is neither 0 nor 1
 */
export function fromStorage(raw: ArrayBuffer, spec: {
    dtype: string;
    shape: number[];
    storage: string;
    name?: string;
}): ArrayBufferView;
export const PLAN_VERSION: 1;
/** Host dtype name -> the TypedArray class a method input/output uses in the page. */
export const DTYPE_ARRAYS: Readonly<{
    float32: Float32ArrayConstructor;
    float64: Float64ArrayConstructor;
    int32: Int32ArrayConstructor;
    int64: BigInt64ArrayConstructor;
    int16: Int16ArrayConstructor;
    int8: Int8ArrayConstructor;
    uint8: Uint8ArrayConstructor;
    uint16: Uint16ArrayConstructor;
    uint32: Uint32ArrayConstructor;
    bool: Uint8ArrayConstructor;
}>;
export function numel(shape: number[]): number;
export function storageBytes(io: any): number;
export function describeIO(io: any): string;
