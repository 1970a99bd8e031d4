export class EmbeddingTable {
    /**
     * @param {ArrayBuffer} table int8 [vocab, hidden] @param {ArrayBuffer} scales f32 [vocab]
     * @param {number} hidden
     * @throws {ModelFolderError}
     */
    constructor(table: ArrayBuffer, scales: ArrayBuffer, hidden: number);
    vocab: number;
    table: Int8Array<ArrayBuffer>;
    scales: Float32Array<ArrayBuffer>;
    hidden: number;
    /** Write the embedding of token `id` into `out` at element `at`. */
    write(id: any, out: any, at: any): void;
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
    /** float32 [rows, hidden] embeddings of positions start .. start+rows-1. */
    window(start: any, rows: any): Float32Array<ArrayBuffer>;
    #private;
}
