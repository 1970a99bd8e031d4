// What the page keeps of model folders in the Cache API (`CACHE_NAME`): list, check, delete.
//
//   const models = await listCachedModels();   // [{base, name, files: [{name, url, bytes}], bytes, complete}]
//   if (await hasModelInCache('/models/smollm2/')) ...
//   await deleteModelFromCache('/models/smollm2/');
//
// loadModel stores each verified file of a URL folder under its URL (web/files.js) and then one
// index entry per folder (`recordCachedModel`, from the worker) naming the files it stored; the
// index's key has a query no model file can have (UrlFolder refuses '?' in names).

import { CACHE_NAME } from './files.js';
import { InputError } from './errors.js';

const INDEX_QUERY = '?webpte-index';
const INDEX_FORMAT = 'webpte-cache-index/1';

/**
 * @typedef {object} CachedFile
 * @property {string} name path inside the model folder (`tokenizer/tokenizer.json`)
 * @property {string} url the cache entry's URL
 * @property {number} bytes
 */
/**
 * @typedef {object} CachedModel one model folder's files in the cache
 * @property {string} base the folder's base URL (ends in '/')
 * @property {string | null} name the model's name, from the index (null: files without an index)
 * @property {CachedFile[]} files the entries now in the cache
 * @property {number} bytes their total size
 * @property {boolean} complete every file the index names is in the cache
 * @property {string | null} storedAt when loadModel last recorded the folder (ISO time)
 */

/** The folder's base URL, absolute and ending in '/'. @param {string | URL} url */
function baseOf(url) {
  if (url instanceof URL) url = url.href;
  if (typeof url !== 'string' || !url) throw new InputError('the model cache takes a model folder\'s base URL (a string or URL)');
  let href;
  try {
    href = new URL(url, globalThis.location?.href).href;
  } catch {
    throw new InputError(`${url} is not a URL; pass the model folder's base URL, as given to loadModel`);
  }
  return href.endsWith('/') ? href : `${href}/`;
}

/** The cache, or null where there is none (no Cache API, storage disabled). */
async function openCache() {
  if (typeof caches === 'undefined') return null;
  try {
    return (await caches.has(CACHE_NAME)) ? await caches.open(CACHE_NAME) : null;
  } catch {
    return null;
  }
}

async function entryBytes(response) {
  const length = Number(response.headers.get('content-length'));
  return Number.isFinite(length) && response.headers.has('content-length') ? length : (await response.blob()).size;
}

/**
 * Record which files of the folder at `base` are in the cache (called by the worker after
 * loadModel stored them). Files not in the cache are left out; with none, nothing is recorded.
 * Never throws for want of storage: the index only names what is listed.
 * @param {string} base the folder's base URL (ends in '/')
 * @param {string} name the model's name
 * @param {{name: string}[]} files the folder's files (web_glue.model_manifest)
 * @returns {Promise<void>}
 */
export async function recordCachedModel(base, name, files) {
  if (typeof caches === 'undefined') return;
  let cache;
  try {
    cache = await caches.open(CACHE_NAME);
  } catch {
    return;
  }
  const stored = [];
  for (const f of files) {
    const hit = await cache.match(new URL(f.name, base).href);
    if (hit) stored.push({ name: f.name, bytes: await entryBytes(hit) });
  }
  if (!stored.length) return;
  const index = { format: INDEX_FORMAT, base, name, files: stored, storedAt: new Date().toISOString() };
  try {
    await cache.put(`${base}${INDEX_QUERY}`, new Response(JSON.stringify(index), { headers: { 'content-type': 'application/json' } }));
  } catch { /* a full quota: the files stay listed, without a name */ }
}

/**
 * The model folders kept in the Cache API, with their files and sizes, sorted by base URL.
 * Files stored before indexes existed are grouped by folder, with `name: null`.
 * @returns {Promise<CachedModel[]>}
 */
export async function listCachedModels() {
  const cache = await openCache();
  if (!cache) return [];
  const keys = (await cache.keys()).map((r) => r.url);
  /** @type {Map<string, CachedModel>} */
  const models = new Map();
  const named = new Map(); // base -> file names the index lists
  for (const url of keys.filter((u) => u.endsWith(INDEX_QUERY))) {
    const base = url.slice(0, -INDEX_QUERY.length);
    let index = null;
    try {
      index = await (await cache.match(url)).json();
    } catch { /* an unreadable index: its files are listed without a name */ }
    if (index?.format !== INDEX_FORMAT) continue;
    models.set(base, { base, name: index.name ?? null, files: [], bytes: 0, complete: true, storedAt: index.storedAt ?? null });
    named.set(base, new Set(index.files.map((f) => f.name)));
  }
  const bases = [...models.keys()].sort((a, b) => b.length - a.length); // the deepest folder first
  const loose = keys.filter((u) => !u.endsWith(INDEX_QUERY)).sort();
  for (const url of loose) {
    let base = bases.find((b) => url.startsWith(b));
    if (!base) { // no index: the folder of the file, or a folder above it already seen
      const dir = url.slice(0, url.lastIndexOf('/') + 1);
      base = [...models.keys()].find((b) => models.get(b).name === null && dir.startsWith(b)) ?? dir;
      if (!models.has(base)) models.set(base, { base, name: null, files: [], bytes: 0, complete: false, storedAt: null });
    }
    const model = models.get(base);
    const bytes = await entryBytes(await cache.match(url));
    model.files.push({ name: url.slice(base.length), url, bytes });
    model.bytes += bytes;
  }
  for (const [base, names] of named) {
    const model = models.get(base);
    const have = new Set(model.files.map((f) => f.name));
    model.complete = [...names].every((n) => have.has(n));
  }
  return [...models.values()].filter((m) => m.files.length).sort((a, b) => (a.base < b.base ? -1 : 1));
}

/**
 * Whether every file loadModel stored of the folder at `url` is still in the cache (a next
 * loadModel of it downloads nothing but its meta file).
 * @param {string | URL} url the folder's base URL, as given to loadModel
 * @returns {Promise<boolean>}
 * @throws {InputError}
 */
export async function hasModelInCache(url) {
  const base = baseOf(url);
  const model = (await listCachedModels()).find((m) => m.base === base);
  return !!model && model.name !== null && model.complete && model.files.length > 0;
}

/**
 * Delete the folder at `url` from the cache: every entry under its base URL and its index.
 * A model loaded now keeps working (its files are in memory); the next load downloads again.
 * @param {string | URL} url the folder's base URL, as given to loadModel
 * @returns {Promise<{files: number, bytes: number}>} what was deleted
 * @throws {InputError}
 */
export async function deleteModelFromCache(url) {
  const base = baseOf(url);
  const cache = await openCache();
  if (!cache) return { files: 0, bytes: 0 };
  let files = 0;
  let bytes = 0;
  for (const req of await cache.keys()) {
    if (!req.url.startsWith(base)) continue;
    if (!req.url.endsWith(INDEX_QUERY)) {
      files += 1;
      bytes += await entryBytes(await cache.match(req));
    }
    await cache.delete(req);
  }
  return { files, bytes };
}
