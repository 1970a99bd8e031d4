// Model files in the worker: fetched from a base URL (streaming, progress, Cache API) or read
// from a local folder (File objects), and checked against their pinned sha256 with
// crypto.subtle before use. Which files and which hashes is Python's answer
// (web_glue.model_manifest, from webpte.host.files); this module only moves and checks bytes.

import { HashMismatchError, InputError, ModelFolderError } from './errors.js';
import { Progress } from './progress.js';
import { resumes } from './sources.js';

/** Cache API name; bump the version when the way entries are stored changes. */
export const CACHE_NAME = 'webpte-models-v1';

/** Meta files that identify a folder's layout, in the order they are looked for. */
export const META_NAMES = Object.freeze(['webpte_model.json', 'vlm_meta.json']);

/** sha256 of `bytes` as lowercase hex. @param {ArrayBuffer | ArrayBufferView} bytes */
export async function sha256Hex(bytes) {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
}

const MB = (n) => `${(n / 1e6).toFixed(1)} MB`;

/** A file the folder does not have (HTTP 404, or not among the picked files). */
export class MissingFile extends Error {}

/** A body of unknown length (encoded, or no Content-Length): streamed whole, not resumable. */
async function readUnsized(url, resp, onBytes) {
  if (!resp.body) {
    const buf = await resp.arrayBuffer();
    onBytes(buf.byteLength, 0);
    return buf;
  }
  const chunks = [];
  let loaded = 0;
  try {
    for await (const chunk of resp.body) {
      chunks.push(chunk);
      loaded += chunk.length;
      onBytes(chunk.length, 0);
    }
  } catch (err) {
    throw new InputError(`${url} was cut after ${loaded} bytes (${err.message}); its size is unknown, so it cannot resume: retry`);
  }
  const out = new Uint8Array(loaded);
  let at = 0;
  for (const c of chunks) { out.set(c, at); at += c.length; }
  return out.buffer;
}

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
export async function fetchBody(url, onBytes = () => {}, { attempts = 4 } = {}) {
  let out = null;
  let total = 0;
  let loaded = 0;
  let etag = null;
  let cut = '';
  for (let attempt = 1; ; attempt++) {
    const from = loaded;
    let resp;
    try {
      resp = await fetch(url, from ? { headers: { range: `bytes=${from}-` } } : undefined);
    } catch (err) {
      if (from && attempt < attempts) continue;
      throw new InputError(`fetching ${url} failed (${err.message}); check the URL and the connection`);
    }
    if (resp.status === 404) throw new MissingFile(`HTTP 404 at ${url}`);
    if (from && resp.status === 206 && resumes(resp, from, total)
        && (etag === null || resp.headers.get('etag') === etag)) {
      // resumed: keep the bytes in hand
    } else if (resp.ok && resp.status !== 206) {
      if (from) { onBytes(-loaded, total); loaded = 0; } // the server ignored the range: start again
      // Content-Length counts encoded bytes; only an unencoded body can be preallocated.
      const encoded = (resp.headers.get('content-encoding') ?? 'identity') !== 'identity';
      total = encoded ? 0 : Number(resp.headers.get('content-length')) || 0;
      etag = resp.headers.get('etag');
      if (!total) return readUnsized(url, resp, onBytes);
      if (!resp.body) {
        const buf = await resp.arrayBuffer();
        onBytes(buf.byteLength, total);
        if (buf.byteLength !== total) throw new InputError(`${url} ended after ${buf.byteLength} of ${total} bytes; the download was cut, retry`);
        return buf;
      }
      out = new Uint8Array(total);
    } else if (from) {
      throw new InputError(`${url} was cut after ${from} of ${total} bytes (${cut}) and the server did not resume it `
        + `(HTTP ${resp.status}); retry`);
    } else {
      throw new InputError(`fetching ${url} gave HTTP ${resp.status}; check the URL`);
    }
    try {
      for await (const chunk of resp.body) {
        if (loaded + chunk.length > total) throw new InputError(`${url} is longer than its Content-Length`);
        out.set(chunk, loaded);
        loaded += chunk.length;
        onBytes(chunk.length, total);
      }
      cut = 'the body ended early';
    } catch (err) {
      if (err instanceof InputError) throw err;
      cut = err.message;
    }
    if (loaded === total) return out.buffer;
    if (attempt >= attempts) {
      throw new InputError(`${url} ended after ${loaded} of ${total} bytes (${cut}) in ${attempt} requests; the download was cut, retry`);
    }
  }
}

/** A model folder at a base URL: file `name` is `${base}${name}`. */
export class UrlFolder {
  /** @param {string} base absolute URL ending in '/' */
  constructor(base) {
    this.base = base;
    this.where = base;
  }

  /** The URL of `name`; a name that would leave the folder's base URL is refused. */
  url(name) {
    const href = new URL(name, this.base).href;
    if (!href.startsWith(this.base) || /(^|\/)\.\.?(\/|$)|[\\?#%:]/.test(name)) {
      const why = `${name} is not a plain relative path inside the model folder ${this.where}`;
      throw new ModelFolderError(`${why}; the model's meta file must name files inside its folder`, [why]);
    }
    return href;
  }

  /** The bytes of `name`, or null when the server has no such file. */
  async probe(name) {
    try {
      return await fetchBody(this.url(name));
    } catch (err) {
      if (err instanceof MissingFile) return null;
      throw err;
    }
  }

  /** @param {string} name @param {(n: number, total: number) => void} onBytes */
  read(name, onBytes) { return fetchBody(this.url(name), onBytes); }
}

/**
 * A local folder: File objects (from `<input webkitdirectory>` or a drop), matched by their
 * relative path (`webkitRelativePath`, else the name): `tokenizer/tokenizer.json` matches
 * `MyModel/tokenizer/tokenizer.json`, or a lone `tokenizer.json` when only one file has that name.
 */
export class LocalFolder {
  /** @param {File[]} files */
  constructor(files) {
    this.files = files.map((f) => ({ file: f, path: (f.webkitRelativePath || f.name).replace(/\\/g, '/') }));
    this.where = 'the picked folder';
  }

  /** The File for `name`, or null. @param {string} name */
  find(name) {
    const exact = this.files.filter((f) => f.path === name || f.path.endsWith(`/${name}`));
    if (exact.length) return exact.sort((a, b) => a.path.length - b.path.length)[0].file;
    const base = name.split('/').pop();
    const loose = this.files.filter((f) => f.path.split('/').pop() === base);
    return loose.length === 1 ? loose[0].file : null;
  }

  async probe(name) {
    const f = this.find(name);
    return f ? f.arrayBuffer() : null;
  }

  async read(name, onBytes) {
    const f = this.find(name);
    if (!f) throw new MissingFile(`not among the ${this.files.length} picked files`);
    const buf = await f.arrayBuffer();
    onBytes(buf.byteLength, f.size);
    return buf;
  }
}

/**
 * Find the folder's meta file: `{name, bytes}` of the first of META_NAMES present (for the
 * SmolVLM layout a local folder may hold only `smolvlm_decoder_q8.pte`), or null.
 * @param {UrlFolder | LocalFolder} folder
 */
export async function findMeta(folder) {
  for (const name of META_NAMES) {
    const bytes = await folder.probe(name);
    if (bytes) return { name, bytes };
  }
  if (folder instanceof LocalFolder && folder.find('smolvlm_decoder_q8.pte')) return { name: 'vlm_meta.json', bytes: null };
  return null;
}

async function openCache(enabled) {
  if (!enabled || typeof caches === 'undefined') return null;
  try {
    return await caches.open(CACHE_NAME);
  } catch {
    return null; // storage disabled (private mode, policy): load without a cache
  }
}

async function cached(cache, url) {
  const hit = cache && await cache.match(url);
  return hit ? hit.arrayBuffer() : null;
}

/**
 * The `cache` progress event of a file the browser refused to store: the model loads without
 * it in the cache (the bytes are in hand; losing the download to a storage failure would be
 * worse). `error.name` is 'QuotaError' when the site's storage quota is used up, else
 * 'WebpteError' (the browser's own storage failure, e.g. a private window's in-memory limit).
 * @param {string} file @param {string} url @param {number | null} size @param {unknown} err
 */
export function cacheRefusal(file, url, size, err) {
  const quota = err?.name === 'QuotaExceededError';
  const what = `the browser refused to store ${size == null ? 'the' : MB(size)} model file ${url}`;
  const message = quota
    ? `${what}: its storage quota for this site is used up. The model loads without caching it; free space `
      + '(clear this site\'s data or other large site data) to keep it for the next load, or load with { cache: false }'
    : `${what} (${err?.name ?? 'Error'}: ${err?.message ?? err}). The model loads without caching it`;
  return { stage: 'cache', file, stored: false, error: { name: quota ? 'QuotaError' : 'WebpteError', message } };
}

/** Store `bytes` at `url`; null, or the `cache` event saying the browser refused it. */
async function store(cache, file, url, bytes) {
  try {
    await cache.put(url, new Response(bytes, { headers: { 'content-length': String(bytes.byteLength) } }));
    return null;
  } catch (err) {
    await cache.delete(url).catch(() => {});
    return cacheRefusal(file, url, bytes.byteLength, err);
  }
}

function checkSize(spec, bytes) {
  if (spec.size != null && bytes.byteLength !== spec.size) {
    return `${spec.name} is ${bytes.byteLength} bytes, the pinned file is ${spec.size}`;
  }
  return null;
}

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
export async function readModelFiles(folder, specs, { verify = true, cache = true, emit = () => {}, have = new Map(), progress: shared = null } = {}) {
  const store_ = folder instanceof UrlFolder ? await openCache(cache) : null;
  const out = new Map();
  const fromCache = new Set();
  const fetchAll = async (list, progress = new Progress(emit, { stage: 'fetch' })) => {
    for (const s of list) progress.expect(s.name, s.size ?? 0);
    const problems = [];
    await Promise.all(list.map(async (spec) => {
      let bytes = have.get(spec.name) ?? null;
      const url = store_ && spec.sha256 ? folder.url(spec.name) : null;
      if (!bytes && url) bytes = await cached(store_, url);
      if (bytes) {
        if (url && !have.has(spec.name)) fromCache.add(spec.name);
        progress.expect(spec.name, bytes.byteLength);
        progress.add(spec.name, bytes.byteLength, { network: false });
      } else {
        try {
          bytes = await folder.read(spec.name, (n, total) => {
            if (total) progress.expect(spec.name, total);
            progress.add(spec.name, n, { network: folder instanceof UrlFolder });
          });
        } catch (err) {
          if (!(err instanceof MissingFile)) throw err;
          problems.push(`missing ${spec.name} (${err.message})`);
          return;
        }
      }
      progress.finish(spec.name);
      out.set(spec.name, bytes);
    }));
    if (problems.length) {
      throw new ModelFolderError(`the model folder ${folder.where} is not usable:\n  - ${problems.join('\n  - ')}\n`
        + 'Check the folder (or base URL): every file of the model must be there.', problems);
    }
  };

  const checkAll = async (list) => {
    const pinned = list.filter((s) => s.sha256 || s.size != null);
    const progress = new Progress(emit, { stage: 'verify', intervalMs: 0 });
    for (const s of pinned) progress.expect(s.name, out.get(s.name).byteLength);
    const bad = [];
    for (const spec of pinned) {
      const bytes = out.get(spec.name);
      const wrongSize = checkSize(spec, bytes);
      const actual = !wrongSize && verify && spec.sha256 ? await sha256Hex(bytes) : null;
      if (wrongSize || (actual && actual !== spec.sha256)) bad.push({ spec, actual, wrongSize });
      progress.add(spec.name, bytes.byteLength, { network: false });
    }
    return bad;
  };

  await fetchAll(specs, shared ?? undefined);
  let bad = await checkAll(specs);
  const stale = bad.filter((b) => fromCache.has(b.spec.name));
  if (stale.length) { // a corrupted or outdated cache entry: drop it and fetch the file again
    for (const { spec } of stale) {
      await store_.delete(folder.url(spec.name));
      out.delete(spec.name);
      fromCache.delete(spec.name);
    }
    await fetchAll(stale.map((b) => b.spec));
    bad = bad.filter((b) => !stale.includes(b)).concat(await checkAll(stale.map((b) => b.spec)));
  }
  if (bad.length) {
    const { spec, actual, wrongSize } = bad[0];
    const detail = wrongSize
      ? { file: spec.name, expected: `${spec.size} bytes`, actual: `${out.get(spec.name).byteLength} bytes` }
      : { file: spec.name, expected: spec.sha256, actual };
    for (const b of bad) out.delete(b.spec.name);
    const what = wrongSize ?? `${spec.name} does not match its pinned sha256 (expected ${spec.sha256}, got ${actual})`;
    const more = bad.length > 1 ? ` (${bad.length - 1} more file(s) failed too: ${bad.slice(1).map((b) => b.spec.name).join(', ')})` : '';
    throw new HashMismatchError(`${what}; the file was not used. The download may be corrupt, or `
      + `${folder.where} holds another version of the model: download the files again${more}`, detail);
  }
  if (store_) {
    for (const spec of specs) {
      if (spec.sha256 && !fromCache.has(spec.name)) {
        const refused = await store(store_, spec.name, folder.url(spec.name), out.get(spec.name));
        if (refused) emit(refused);
      }
    }
  }
  return out;
}
