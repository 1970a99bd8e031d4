/** sha256 of `bytes` as lowercase hex. @param {ArrayBuffer | ArrayBufferView} bytes */
export function sha256Hex(bytes: ArrayBuffer | ArrayBufferView): Promise<string>;
/**
 * GET `url` as an ArrayBuffer, reporting each chunk: `onBytes(n, total)` (total 0 when the
 * body is encoded or has no Content-Length; n < 0 takes back bytes counted before a restart).
 * A body cut short resumes with a `Range: bytes=N-` request (up to `attempts` requests in
 * all) where the server answers 206 for the same file; a server that answers 200 sends it
 * again from the start. A 404 throws MissingFile.
 * @param {string} url @param {(n: number, total: number) => void} [onBytes]
 * @param {{attempts?: number}} [options]
 * @returns {Promise<ArrayBuffer>}
 * @throws {InputError}
 */
export function fetchBody(url: string, onBytes?: (n: number, total: number) => void, { attempts }?: {
    attempts?: number;
}): Promise<ArrayBuffer>;
/**
 * Find the folder's meta file: `{name, bytes}` of the first of META_NAMES present (for the
 * SmolVLM layout a local folder may hold only `smolvlm_decoder_q8.pte`), or null.
 * @param {UrlFolder | LocalFolder} folder
 */
export function findMeta(folder: UrlFolder | LocalFolder): Promise<{
    name: string;
    bytes: ArrayBuffer;
}>;
/**
 * The `cache` progress event of a file the browser refused to store: the model loads without
 * it in the cache (the bytes are in hand; losing the download to a storage failure would be
 * worse). `error.name` is 'QuotaError' when the site's storage quota is used up, else
 * 'WebpteError' (the browser's own storage failure, e.g. a private window's in-memory limit).
 * @param {string} file @param {string} url @param {number | null} size @param {unknown} err
 */
export function cacheRefusal(file: string, url: string, size: number | null, err: unknown): {
    stage: string;
    file: string;
    stored: boolean;
    error: {
        name: string;
        message: string;
    };
};
/**
 * Read every file of `specs` (`[{name, size, sha256}]`, web_glue.model_manifest) from
 * `folder`, check sizes and pinned sha256 values, and cache verified pinned files of a URL
 * folder. Files already in hand (`have`, e.g. the meta file probed first) are not read again.
 * A cached entry that fails its hash is dropped and fetched again; a fetched or local file
 * that fails it throws HashMismatchError and is neither used nor cached.
 * Events: `fetch` then `verify` ({file, loaded, total, fileLoaded, fileTotal, etaSeconds}).
 * @param {UrlFolder | LocalFolder} folder
 * @param {{name: string, size?: number | null, sha256?: string | null}[]} specs
 * `progress` (a Progress of stage fetch) counts the bytes in one total with other files.
 * @param {{verify?: boolean, cache?: boolean, emit?: (e: object) => void, have?: Map<string, ArrayBuffer>,
 *   progress?: Progress}} [options]
 * @returns {Promise<Map<string, ArrayBuffer>>}
 * A file the browser refuses to store is a `cache` event (cacheRefusal), not a failure.
 * @throws {ModelFolderError | HashMismatchError | InputError}
 */
export function readModelFiles(folder: UrlFolder | LocalFolder, specs: {
    name: string;
    size?: number | null;
    sha256?: string | null;
}[], { verify, cache, emit, have, progress: shared }?: {
    verify?: boolean;
    cache?: boolean;
    emit?: (e: object) => void;
    have?: Map<string, ArrayBuffer>;
    progress?: Progress;
}): Promise<Map<string, ArrayBuffer>>;
/** Cache API name; bump the version when the way entries are stored changes. */
export const CACHE_NAME: "webpte-models-v1";
/** Meta files that identify a folder's layout, in the order they are looked for. */
export const META_NAMES: readonly string[];
/** A file the folder does not have (HTTP 404, or not among the picked files). */
export class MissingFile extends Error {
}
/** A model folder at a base URL: file `name` is `${base}${name}`. */
export class UrlFolder {
    /** @param {string} base absolute URL ending in '/' */
    constructor(base: string);
    base: string;
    where: string;
    /** The URL of `name`; a name that would leave the folder's base URL is refused. */
    url(name: any): string;
    /** The bytes of `name`, or null when the server has no such file. */
    probe(name: any): Promise<ArrayBuffer>;
    /** @param {string} name @param {(n: number, total: number) => void} onBytes */
    read(name: string, onBytes: (n: number, total: number) => void): Promise<ArrayBuffer>;
}
/**
 * A local folder: File objects (from `<input webkitdirectory>` or a drop), matched by their
 * relative path (`webkitRelativePath`, else the name): `tokenizer/tokenizer.json` matches
 * `MyModel/tokenizer/tokenizer.json`, or a lone `tokenizer.json` when only one file has that name.
 */
export class LocalFolder {
    /** @param {File[]} files */
    constructor(files: File[]);
    files: {
        file: File;
        path: string;
    }[];
    where: string;
    /** The File for `name`, or null. @param {string} name */
    find(name: string): File;
    probe(name: any): Promise<ArrayBuffer>;
    read(name: any, onBytes: any): Promise<ArrayBuffer>;
}
import { Progress } from './progress.js';
