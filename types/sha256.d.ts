/** Incremental SHA-256: `update(bytes)` any number of times, then `hex()` once. */
export class Sha256 {
    h: Int32Array<ArrayBuffer>;
    w: Int32Array<ArrayBuffer>;
    block: Uint8Array<ArrayBuffer>;
    filled: number;
    length: number;
    /** @param {Uint8Array} bytes */
    update(bytes: Uint8Array): this;
    /** The digest as lowercase hex (the hash is finished: no more updates). */
    hex(): string;
    #private;
}
