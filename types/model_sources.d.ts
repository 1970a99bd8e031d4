/**
 * The streamed program files of `specs` (roles in STREAMED_ROLES) of `folder`: a Map name ->
 * VerifiedFile. A file in the cache is read from it (its blob, in slices); one a preflight
 * planned (`ranges`: name -> its Ranges) is read by Range requests while it streams into the
 * GPU, and cached as it passes; any other is downloaded first (into the cache, or a Blob
 * without one) and verified, since its plan needs random reads. `progress` (web/progress.js,
 * stage fetch) counts the bytes downloaded here; the streamed ones are counted by the loader.
 * `problems` gets a line per missing file; `meter` (web/upload.js HeldMeter) counts the chunks
 * a download holds.
 * @returns {Promise<Map<string, VerifiedFile>>}
 * A file the browser refuses to store is a `cache` event on `progress.emit`, not a failure.
 * @throws {HashMismatchError | InputError}
 */
export function programFiles(folder: any, specs: any, { verify, cache, ranges, chunkBytes, progress, problems, meter }: {
    verify?: boolean;
    cache?: boolean;
    ranges?: Map<any, any>;
    chunkBytes: any;
    progress: any;
    problems: any;
    meter?: any;
}): Promise<Map<string, VerifiedFile>>;
/**
 * The Blob of `file` (a VerifiedFile of programFiles for `spec`), checked by streaming
 * through it once unless its download just did; `progress` counts the bytes read. A cached
 * entry that fails its hash is dropped and fetched again, once; a fetched or local file that
 * fails is a HashMismatchError. `meter` (web/upload.js HeldMeter) counts the chunk held.
 * @param {object} folder a UrlFolder or LocalFolder (web/files.js)
 * @param {{name: string, size?: number | null, sha256?: string | null}} spec
 * @param {VerifiedFile} file
 * @param {{verify?: boolean, cache?: boolean, chunkBytes?: number, progress: object, problems: string[], meter?: object}} options
 * @returns {Promise<Blob>}
 * @throws {HashMismatchError | ModelFolderError | InputError}
 */
export function verifiedBlob(folder: object, spec: {
    name: string;
    size?: number | null;
    sha256?: string | null;
}, file: VerifiedFile, { verify, cache, chunkBytes, progress, problems, meter }: {
    verify?: boolean;
    cache?: boolean;
    chunkBytes?: number;
    progress: object;
    problems: string[];
    meter?: object;
}): Promise<Blob>;
/** Roles of a model's files that are streamed to the GPU, not held. */
export const STREAMED_ROLES: readonly string[];
/** Roles of a model's files kept as Blobs and read by rows, not held. */
export const BLOB_ROLES: readonly string[];
/**
 * A streamed file checked against its pinned size and sha256 (`spec`) as its chunks pass;
 * `sink` (a cache entry being written) gets each chunk of the first whole pass and is kept
 * only if the file is whole and matches. A mismatch is a HashMismatchError after the last chunk: the executor being
 * built from it is then disposed, so the file is never used.
 */
export class VerifiedFile {
    /**
     * @param {object} file a source of web/sources.js
     * @param {{name: string, size?: number | null, sha256?: string | null}} spec
     * @param {{verify?: boolean, sink?: object | null, fromCache?: boolean, where?: string, counted?: boolean}} [options]
     */
    constructor(file: object, spec: {
        name: string;
        size?: number | null;
        sha256?: string | null;
    }, { verify, sink, fromCache, where, counted }?: {
        verify?: boolean;
        sink?: object | null;
        fromCache?: boolean;
        where?: string;
        counted?: boolean;
    });
    file: any;
    spec: {
        name: string;
        size?: number | null;
        sha256?: string | null;
    };
    name: any;
    size: any;
    verify: boolean;
    sink: any;
    fromCache: boolean;
    where: string;
    counted: boolean;
    readSync(start: any, stop: any): any;
    chunks(onBytes: any, options: any): AsyncGenerator<any, void, unknown>;
}
