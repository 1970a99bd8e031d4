// The program files of a model folder (decoder, vision and their .ptd data files) as streamed
// sources (web/sources.js), so a model's weights go from the network, the Cache API or a
// local file to the GPU buffers in bounded chunks. Each is checked against its pinned size
// and sha256 as it passes (web/sha256.js); a fetched file is written to the cache as it
// passes and kept only once it is whole and verified. The embedding table is kept as a Blob
// the same way (its rows are read as windows need them: web/embeddings.js). The other files
// of the folder (tokenizer, embedding scales, meta) are read whole by web/files.js readModelFiles.

import { HashMismatchError, ModelFolderError } from './errors.js';
import { CACHE_NAME, LocalFolder, MissingFile, cacheRefusal } from './files.js';
import { Sha256 } from './sha256.js';
import { BlobFile, CheckedFile, RangedFile, UrlFile, blobOf } from './sources.js';

/** Roles of a model's files that are streamed to the GPU, not held. */
export const STREAMED_ROLES = Object.freeze(['decoder', 'vision', 'decoder_data', 'vision_data']);

/** Roles of a model's files kept as Blobs and read by rows, not held. */
export const BLOB_ROLES = Object.freeze(['embed_tokens']);

/**
 * A cache entry written as a file streams: `write` each chunk (waits while the cache is
 * behind), `close` once the file is verified (the entry is kept), `abort` otherwise (none is).
 */
function cacheSink(store, url, size, onRefused) {
  const { readable, writable } = new TransformStream();
  const headers = size != null ? { 'content-length': String(size) } : {};
  const put = store.put(url, new Response(readable, { headers }));
  let refused = null;
  put.catch((err) => { refused = err; });
  const writer = writable.getWriter();
  return {
    async write(bytes) {
      if (refused) return; // the browser gave up storing it: the file streams on uncached
      await writer.ready.catch(() => {});
      writer.write(bytes).catch(() => {});
    },
    async close() {
      await writer.close().catch(() => {});
      try {
        await put;
      } catch (err) {
        await store.delete(url).catch(() => {});
        onRefused(err);
      }
    },
    async abort(why) {
      await writer.abort(why).catch(() => {});
      await put.catch(() => {});
      await store.delete(url).catch(() => {});
    },
  };
}

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
  constructor(file, spec, { verify = true, sink = null, fromCache = false, where = 'the model folder', counted = false } = {}) {
    this.file = file;
    this.spec = spec;
    this.name = file.name;
    this.size = file.size;
    this.verify = verify;
    this.sink = sink;
    this.fromCache = fromCache;
    this.where = where;
    this.counted = counted; // its bytes were counted as they were downloaded, before it streams
  }

  readSync(start, stop) { return this.file.readSync(start, stop); }

  async* chunks(onBytes, options) {
    const { spec, sink } = this;
    const hash = this.verify && spec.sha256 ? new Sha256() : null;
    let n = 0;
    let done = false;
    try {
      for await (const chunk of this.file.chunks(onBytes, options)) {
        hash?.update(chunk.bytes);
        n += chunk.bytes.byteLength;
        if (sink) await sink.write(chunk.bytes.slice()); // the cache reads it later; the chunk's buffer is reused
        yield chunk;
      }
      const wrongSize = spec.size != null && n !== spec.size ? `${spec.name} is ${n} bytes, the pinned file is ${spec.size}` : null;
      const actual = !wrongSize && hash ? hash.hex() : null;
      if (wrongSize || (actual && actual !== spec.sha256)) {
        const detail = wrongSize ? { file: spec.name, expected: `${spec.size} bytes`, actual: `${n} bytes` }
          : { file: spec.name, expected: spec.sha256, actual };
        const what = wrongSize ?? `${spec.name} does not match its pinned sha256 (expected ${spec.sha256}, got ${actual})`;
        const err = new HashMismatchError(`${what}; the file was not used. The download may be corrupt, or `
          + `${this.where} holds another version of the model: download the files again`, detail);
        err.fromCache = this.fromCache;
        throw err;
      }
      await sink?.close();
      this.sink = null; // cached now: a later pass (the autotune's builds, then the load) only reads
      done = true;
    } finally {
      if (!done) await sink?.abort(new Error('the file was not verified'));
    }
  }
}

async function openCache(enabled) {
  if (!enabled || typeof caches === 'undefined') return null;
  try {
    return await caches.open(CACHE_NAME);
  } catch {
    return null;
  }
}

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
export async function programFiles(folder, specs, { verify = true, cache = true, ranges = new Map(), chunkBytes, progress, problems, meter = null }) {
  const out = new Map();
  const store = folder instanceof LocalFolder ? null : await openCache(cache);
  for (const spec of specs) {
    const opts = { verify, where: folder.where };
    if (folder instanceof LocalFolder) {
      const f = folder.find(spec.name);
      if (!f) problems.push(`missing ${spec.name} (not among the ${folder.files.length} picked files)`);
      else out.set(spec.name, new VerifiedFile(new BlobFile(f, spec.name, { chunkBytes }), spec, opts));
      continue;
    }
    const url = folder.url(spec.name);
    const keep = store && spec.sha256 ? store : null;
    const refused = (size) => (err) => progress.emit(cacheRefusal(spec.name, url, size, err));
    const hit = keep && await keep.match(url);
    if (hit) {
      out.set(spec.name, new VerifiedFile(new BlobFile(await hit.blob(), spec.name, { chunkBytes }), spec, { ...opts, fromCache: true }));
      continue;
    }
    const planned = ranges.get(spec.name);
    if (planned) {
      const file = new CheckedFile(new RangedFile(url, planned.size, (a, b) => planned.read(a, b), { chunkBytes }), planned.held);
      file.name = spec.name;
      out.set(spec.name, new VerifiedFile(file, spec, { ...opts, sink: keep && cacheSink(keep, url, planned.size, refused(planned.size)) }));
      continue;
    }
    const net = new VerifiedFile(new UrlFile(url, null, { missing: (why) => new MissingFile(why) }), spec, { ...opts, sink: keep && cacheSink(keep, url, spec.size, refused(spec.size)) });
    const count = (n) => progress.add(spec.name, n, { network: true });
    let blob;
    try {
      if (keep) {
        const chunks = net.chunks(count, { meter });
        while (!(await chunks.next()).done); // eslint-disable-line no-empty
        const hit = await keep.match(url);
        // Refused by the cache (a `cache` event said so): downloaded again into a Blob.
        blob = hit ? await hit.blob()
          : await blobOf(new VerifiedFile(new UrlFile(url, null, { missing: (why) => new MissingFile(why) }), spec, opts).chunks(() => {}));
      } else {
        blob = await blobOf(net.chunks(count, { meter }));
      }
    } catch (err) {
      if (!(err instanceof MissingFile)) throw err;
      problems.push(`missing ${spec.name} (${err.message})`);
      continue;
    }
    progress.finish(spec.name);
    out.set(spec.name, new VerifiedFile(new BlobFile(blob, spec.name, { chunkBytes }), spec, { verify: false, counted: true }));
  }
  return out;
}

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
export async function verifiedBlob(folder, spec, file, { verify = true, cache = true, chunkBytes, progress, problems, meter }) {
  const pass = async (f) => {
    if (!f.counted) {
      const chunks = f.chunks((n) => progress.add(spec.name, n, { network: false }), { meter });
      while (!(await chunks.next()).done); // eslint-disable-line no-empty
    }
    progress.finish(spec.name);
    return f.file.blob;
  };
  try {
    return await pass(file);
  } catch (err) {
    if (!(err instanceof HashMismatchError && err.fromCache)) throw err;
    await (await caches.open(CACHE_NAME)).delete(folder.url(spec.name));
    progress.add(spec.name, -progress.files.get(spec.name).loaded, { network: false }); // counted again below
    const again = (await programFiles(folder, [spec], { verify, cache, chunkBytes, progress, problems, meter })).get(spec.name);
    if (!again) throw new ModelFolderError(`the model folder ${folder.where} is not usable: ${problems.join('; ')}`, [...problems]);
    return pass(again);
  }
}
