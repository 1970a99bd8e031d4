/**
 * Record which files of the folder at `base` are in the cache (called by the worker after
 * loadModel stored them). Files not in the cache are left out; with none, nothing is recorded.
 * Never throws for want of storage: the index only names what is listed.
 * @param {string} base the folder's base URL (ends in '/')
 * @param {string} name the model's name
 * @param {{name: string}[]} files the folder's files (web_glue.model_manifest)
 * @returns {Promise<void>}
 */
export function recordCachedModel(base: string, name: string, files: {
    name: string;
}[]): Promise<void>;
/**
 * The model folders kept in the Cache API, with their files and sizes, sorted by base URL.
 * Files stored before indexes existed are grouped by folder, with `name: null`.
 * @returns {Promise<CachedModel[]>}
 */
export function listCachedModels(): Promise<CachedModel[]>;
/**
 * Whether every file loadModel stored of the folder at `url` is still in the cache (a next
 * loadModel of it downloads nothing but its meta file).
 * @param {string | URL} url the folder's base URL, as given to loadModel
 * @returns {Promise<boolean>}
 * @throws {InputError}
 */
export function hasModelInCache(url: string | URL): Promise<boolean>;
/**
 * Delete the folder at `url` from the cache: every entry under its base URL and its index.
 * A model loaded now keeps working (its files are in memory); the next load downloads again.
 * @param {string | URL} url the folder's base URL, as given to loadModel
 * @returns {Promise<{files: number, bytes: number}>} what was deleted
 * @throws {InputError}
 */
export function deleteModelFromCache(url: string | URL): Promise<{
    files: number;
    bytes: number;
}>;
export type CachedFile = {
    /**
     * path inside the model folder (`tokenizer/tokenizer.json`)
     */
    name: string;
    /**
     * the cache entry's URL
     */
    url: string;
    bytes: number;
};
/**
 * one model folder's files in the cache
 */
export type CachedModel = {
    /**
     * the folder's base URL (ends in '/')
     */
    base: string;
    /**
     * the model's name, from the index (null: files without an index)
     */
    name: string | null;
    /**
     * the entries now in the cache
     */
    files: CachedFile[];
    /**
     * their total size
     */
    bytes: number;
    /**
     * every file the index names is in the cache
     */
    complete: boolean;
    /**
     * when loadModel last recorded the folder (ISO time)
     */
    storedAt: string | null;
};
