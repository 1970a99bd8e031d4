/** Whether a 206 answers `bytes=from-` of a `total`-byte file (also web/files.js's downloads). */
export function resumes(resp: any, from: any, total: any): boolean;
/**
 * A Response body of unknown layout (no byte ranges to plan from) kept as a Blob without
 * holding it: its chunks go to the browser's blob store in parts of about CHUNK_BYTES.
 * @param {AsyncIterable<{bytes: Uint8Array}>} chunks
 * @returns {Promise<Blob>}
 */
export function blobOf(chunks: AsyncIterable<{
    bytes: Uint8Array;
}>): Promise<Blob>;
/** Bytes a streamed file is read in unless the caller says (loadProgram's `chunkBytes`). */
export const CHUNK_BYTES: number;
/** A file the caller gave in memory. */
export class BytesFile {
    /** @param {ArrayBuffer | ArrayBufferView} bytes @param {string} name */
    constructor(bytes: ArrayBuffer | ArrayBufferView, name: string);
    bytes: Uint8Array<ArrayBufferLike>;
    size: number;
    name: string;
    readSync(start: any, stop: any): Uint8Array<ArrayBufferLike>;
    chunks(onBytes?: () => void): AsyncGenerator<{
        offset: number;
        bytes: Uint8Array<ArrayBufferLike>;
    }, void, unknown>;
}
/** A File/Blob (a local file, or a cached Response's body): ranges read on demand. */
export class BlobFile {
    /**
     * @param {Blob} blob @param {string} name
     * @param {{chunkBytes?: number, stallMs?: number[]}} [options] `stallMs`: a slice read's time
     *   limits, one per try (default BLOB_STALL_MS)
     */
    constructor(blob: Blob, name: string, { chunkBytes, stallMs }?: {
        chunkBytes?: number;
        stallMs?: number[];
    });
    blob: Blob;
    stallMs: number[];
    size: number;
    name: string;
    chunkBytes: number;
    /** Synchronous (FileReaderSync: workers only), for Python's planner. */
    readSync(start: any, stop: any): Uint8Array<ArrayBuffer>;
    /** Chunks of `chunkBytes`, each read into the same buffer (valid until the next one). */
    chunks(onBytes?: () => void, { meter }?: {
        meter?: any;
    }): AsyncGenerator<{
        offset: number;
        bytes: Uint8Array<ArrayBuffer>;
    }, void, unknown>;
}
/**
 * A file at a URL whose server serves byte ranges, read in Range requests of `chunkBytes`
 * (one ahead of the chunk being written: two buffers held). A request that fails or comes
 * back short is made again, up to `attempts` times a chunk.
 */
export class RangedFile {
    /**
     * @param {string} url @param {number} size
     * @param {(start: number, stop: number) => Uint8Array} readSync Python's ranges (the preflight's)
     * @param {{chunkBytes?: number, attempts?: number}} [options]
     */
    constructor(url: string, size: number, readSync: (start: number, stop: number) => Uint8Array, { chunkBytes, attempts }?: {
        chunkBytes?: number;
        attempts?: number;
    });
    url: string;
    name: string;
    size: number;
    readSync: (start: number, stop: number) => Uint8Array;
    chunkBytes: number;
    attempts: number;
    etag: string;
    /**
     * Chunks of `chunkBytes` in two buffers, reused: one being written by the caller, the next
     * read into the other meanwhile (a chunk is valid until the next one).
     */
    chunks(onBytes?: () => void, { meter }?: {
        meter?: any;
    }): AsyncGenerator<{
        offset: number;
        bytes: Uint8Array<any>;
    }, void, unknown>;
    #private;
}
/**
 * A file at a URL of `size` bytes (null: unknown until it comes), streamed as one body (no
 * random reads: see blobOf): `chunks` streams it, resuming a cut one with `Range: bytes=N-`
 * (up to `attempts` requests); a server that answers 200 to the resume sends it from the
 * start and the bytes already written are skipped.
 */
export class UrlFile {
    /**
     * @param {string} url @param {number | null} size
     * @param {{attempts?: number, missing?: ((why: string) => Error) | null}} [options]
     */
    constructor(url: string, size?: number | null, { attempts, missing }?: {
        attempts?: number;
        missing?: ((why: string) => Error) | null;
    });
    url: string;
    name: string;
    size: number;
    attempts: number;
    missing: (why: string) => Error;
    chunks(onBytes?: () => void, { meter }?: {
        meter?: any;
    }): AsyncGenerator<{
        offset: number;
        bytes: Uint8Array<ArrayBuffer>;
    }, void, unknown>;
}
/**
 * A streamed file whose chunks must hold the bytes read before at `held` (`[{start, bytes}]`:
 * the ranges a plan was made from); a chunk that differs is an InputError (the file changed).
 */
export class CheckedFile {
    /** @param {UrlFile | BlobFile} file @param {{start: number, bytes: Uint8Array}[]} held */
    constructor(file: UrlFile | BlobFile, held: {
        start: number;
        bytes: Uint8Array;
    }[]);
    file: BlobFile | UrlFile;
    held: {
        start: number;
        bytes: Uint8Array;
    }[];
    name: string;
    size: number;
    readSync(start: any, stop: any): any;
    chunks(onBytes: any, options: any): AsyncGenerator<{
        offset: number;
        bytes: Uint8Array<ArrayBuffer>;
    }, void, unknown>;
}
