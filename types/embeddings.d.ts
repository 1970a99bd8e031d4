export class EmbeddingTable {
    /**
     * @param {Blob} table int8 [vocab, hidden] @param {ArrayBuffer} scales f32 [vocab]
     * @param {number} hidden
     * @param {{cacheBytes?: number}} [options] bytes of recently used rows kept
     * @throws {ModelFolderError}
     */
    constructor(table: Blob, scales: ArrayBuffer, hidden: number, { cacheBytes }?: {
        cacheBytes?: number;
    });
    vocab: number;
    blob: Blob;
    scales: Float32Array<ArrayBuffer>;
    hidden: number;
    keptRows: number;
    /** @type {Map<number, Int8Array>} rows read, least recently used first */
    cache: Map<number, Int8Array>;
    /** the most bytes of rows held at once (kept and being read) */
    peakHeldBytes: number;
    /**
     * The int8 rows of `ids` (one window's), read from the Blob where not kept:
     * a Map id -> Int8Array [hidden] for `write`.
     * @param {number[]} ids @returns {Promise<Map<number, Int8Array>>}
     * @throws {InputError} an id outside the table, or a table that can no longer be read
     */
    rows(ids: number[]): Promise<Map<number, Int8Array>>;
    /**
     * Write the embedding of token `id` into `out` at element `at`, from `rows` (see rows()).
     * @param {number} id @param {Float32Array} out @param {number} at @param {Map<number, Int8Array>} rows
     */
    write(id: number, out: Float32Array, at: number, rows: Map<number, Int8Array>): void;
    #private;
}
/**
 * The rows a conversation feeds: token ids with image embeddings spliced over the `<image>`
 * tokens of the prompt in order (the k-th `<image>` token takes row k of the images, all
 * images of the conversation concatenated).
 */
export class PromptRows {
    /**
     * @param {EmbeddingTable} table @param {number[]} ids
     * @param {Float32Array[]} images each [rows, hidden] @param {number | null} imageId
     * @throws {InputError} when the `<image>` tokens and the image rows differ in number
     */
    constructor(table: EmbeddingTable, ids: number[], images: Float32Array[], imageId: number | null);
    table: EmbeddingTable;
    ids: number[];
    images: Float32Array<ArrayBufferLike>[];
    imageIndex: number[];
    /** A generated token joins the rows (it is fed as a plain token). @param {number} id */
    push(id: number): void;
    /**
     * float32 [rows, hidden] embeddings of positions start .. start+rows-1 (their table rows read first).
     * @param {number} start @param {number} rows @returns {Promise<Float32Array>}
     */
    window(start: number, rows: number): Promise<Float32Array>;
    #private;
}
