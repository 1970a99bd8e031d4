// Program files as the loader reads them: Python's planner reads small ranges synchronously
// (`readSync`), the upload reads the whole file once, in file order, as bounded chunks
// (`chunks`). A file is never held whole unless the caller gave it in memory:
//   BytesFile  an ArrayBuffer the caller gave (views of it, nothing copied)
//   BlobFile   a File/Blob, or a cached Response's body (slices read on demand)
//   RangedFile a URL whose server serves byte ranges: read in Range requests of bounded size
//   UrlFile    a URL read as one body stream (a server without ranges: see blobOf)
// `chunks(onBytes)` reports each chunk's size (progress) and `meter` counts what it holds.

import { InputError } from './errors.js';

/** Bytes a streamed file is read in unless the caller says (loadProgram's `chunkBytes`). */
export const CHUNK_BYTES = 8 << 20;

/**
 * Read `n` bytes of `stream` into `buffer` (at least `n` bytes; BYOB reads transfer it, so the
 * caller keeps the returned one) -> `{buffer, length}`: the same memory serves every chunk, so
 * reading a file allocates nothing per chunk (no garbage for the collector to lag behind).
 * A stream without BYOB reads is copied in. Reads past `n` are cancelled. With `stallMs`, a
 * read that brings nothing for that long cancels the stream and throws a StalledRead.
 */
async function readInto(stream, buffer, n, stallMs = 0) {
  let byob = null;
  try {
    byob = stream.getReader({ mode: 'byob' });
  } catch {
    byob = null; // not a byte stream
  }
  let got = 0;
  const watched = (reader, read) => (stallMs > 0 ? within(read, stallMs, () => {
    reader.cancel().catch(() => {}); // not awaited: a stalled stream may never settle it
    return new StalledRead(`no bytes came for ${stallMs} ms`);
  }) : read);
  if (byob) {
    while (got < n) {
      const { done, value } = await watched(byob, byob.read(new Uint8Array(buffer, got, n - got)));
      if (value) buffer = value.buffer;
      if (done) break;
      got += value.byteLength;
    }
    if (got === n) await byob.cancel().catch(() => {});
    return { buffer, length: got };
  }
  const reader = stream.getReader();
  const into = new Uint8Array(buffer);
  for (;;) {
    const { done, value } = await watched(reader, reader.read());
    if (done) break;
    if (got + value.byteLength > n) {
      await reader.cancel().catch(() => {});
      return { buffer, length: got + value.byteLength };
    }
    into.set(value, got);
    got += value.byteLength;
  }
  return { buffer, length: got };
}

/** A read that brought nothing for its time limit (readInto's `stallMs`). */
class StalledRead extends Error {}

/** `promise`, or the error `timedOut()` makes once `ms` pass first. */
function within(promise, ms, timedOut) {
  let timer;
  const late = new Promise((_, fail) => { timer = setTimeout(() => fail(timedOut()), ms); });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/**
 * How long a slice of a Blob may bring no bytes before it is read again, per try. Chromium
 * now and then never answers the first read of a Cache Storage body's blob (the entry just
 * written; a fresh read of the same slice succeeds), so a stalled slice read is retried with a
 * new stream and buffer; a slice that stalls every time is an InputError.
 */
const BLOB_STALL_MS = [2_000, 10_000, 60_000];

/** A file the caller gave in memory. */
export class BytesFile {
  /** @param {ArrayBuffer | ArrayBufferView} bytes @param {string} name */
  constructor(bytes, name) {
    this.bytes = bytes instanceof ArrayBuffer ? new Uint8Array(bytes) : new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.size = this.bytes.byteLength;
    this.name = name;
  }

  readSync(start, stop) { return this.bytes.subarray(start, stop); }

  async* chunks(onBytes = () => {}) {
    for (let at = 0; at < this.size; at += CHUNK_BYTES) {
      const bytes = this.bytes.subarray(at, at + CHUNK_BYTES);
      onBytes(bytes.byteLength);
      yield { offset: at, bytes };
    }
  }
}

/** A File/Blob (a local file, or a cached Response's body): ranges read on demand. */
export class BlobFile {
  /**
   * @param {Blob} blob @param {string} name
   * @param {{chunkBytes?: number, stallMs?: number[]}} [options] `stallMs`: a slice read's time
   *   limits, one per try (default BLOB_STALL_MS)
   */
  constructor(blob, name, { chunkBytes = CHUNK_BYTES, stallMs = BLOB_STALL_MS } = {}) {
    this.blob = blob;
    this.stallMs = stallMs;
    this.size = blob.size;
    this.name = name;
    this.chunkBytes = chunkBytes;
  }

  /** Synchronous (FileReaderSync: workers only), for Python's planner. */
  readSync(start, stop) {
    return new Uint8Array(new FileReaderSync().readAsArrayBuffer(this.blob.slice(start, stop)));
  }

  /** Chunks of `chunkBytes`, each read into the same buffer (valid until the next one). */
  async* chunks(onBytes = () => {}, { meter = null } = {}) {
    const held = Math.min(this.chunkBytes, this.size);
    let buffer = new ArrayBuffer(held);
    meter?.hold(held);
    try {
      for (let at = 0; at < this.size; at += this.chunkBytes) {
        const n = Math.min(this.chunkBytes, this.size - at);
        let length;
        for (let attempt = 0; length === undefined; attempt++) {
          try {
            ({ buffer, length } = await readInto(this.blob.slice(at, at + n).stream(), buffer, n, this.stallMs[attempt]));
          } catch (err) {
            if (err instanceof StalledRead && attempt + 1 < this.stallMs.length) {
              buffer = new ArrayBuffer(held); // the stalled read keeps the one it was given
              continue;
            }
            throw new InputError(`${this.name} could not be read at byte ${at} (${err.message}); load it again`);
          }
        }
        if (length !== n) throw new InputError(`${this.name} gave ${length} of ${n} bytes at byte ${at}; it changed while it was read: load it again`);
        onBytes(n);
        yield { offset: at, bytes: new Uint8Array(buffer, 0, n) };
      }
    } finally {
      meter?.release(held);
    }
  }
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
  constructor(url, size, readSync, { chunkBytes = CHUNK_BYTES, attempts = 4 } = {}) {
    this.url = url;
    this.name = url;
    this.size = size;
    this.readSync = readSync;
    this.chunkBytes = chunkBytes;
    this.attempts = attempts;
    this.etag = null;
  }

  /** Bytes start..stop into `pool[slot]` (replaced by the buffer the read gives back). */
  async #range(start, stop, pool, slot) {
    let why = '';
    for (let attempt = 1; attempt <= this.attempts; attempt++) {
      let resp;
      try {
        resp = await fetch(this.url, { headers: { range: `bytes=${start}-${stop - 1}` } });
      } catch (err) {
        why = err.message;
        continue;
      }
      const range = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(resp.headers.get('content-range') ?? '');
      const etag = resp.headers.get('etag');
      if (resp.status !== 206 || (range && (Number(range[1]) !== start || (range[3] !== '*' && Number(range[3]) !== this.size)))
          || (this.etag !== null && etag !== this.etag)) {
        await resp.body?.cancel();
        throw new InputError(`${this.url} answered a Range request for bytes ${start}..${stop} with HTTP ${resp.status}`
          + `${range ? ` (${range[0]})` : ''}: it changed on the server or stopped serving ranges; load it again`);
      }
      this.etag = etag;
      try {
        const { buffer, length } = await readInto(resp.body, pool[slot], stop - start);
        pool[slot] = buffer;
        if (length === stop - start) return new Uint8Array(buffer, 0, length);
        why = `${length} of ${stop - start} bytes came`;
      } catch (err) {
        why = err.message;
      }
      if (!pool[slot].byteLength) pool[slot] = new ArrayBuffer(this.chunkBytes); // detached by a failed read
    }
    throw new InputError(`${this.url}: bytes ${start}..${stop} could not be read in ${this.attempts} requests (${why}); the download was cut, retry`);
  }

  /**
   * Chunks of `chunkBytes` in two buffers, reused: one being written by the caller, the next
   * read into the other meanwhile (a chunk is valid until the next one).
   */
  async* chunks(onBytes = () => {}, { meter = null } = {}) {
    const held = Math.min(this.chunkBytes, this.size);
    const pool = [new ArrayBuffer(held), new ArrayBuffer(held)];
    meter?.hold(held);
    meter?.hold(held);
    const read = (a, slot) => {
      const p = this.#range(a, Math.min(a + this.chunkBytes, this.size), pool, slot);
      p.catch(() => {}); // awaited below; a read ahead nobody awaits must not be an unhandled rejection
      return p;
    };
    let next = this.size ? read(0, 0) : null;
    let slot = 0;
    try {
      for (let at = 0; at < this.size;) {
        const bytes = await next;
        const end = at + bytes.byteLength;
        slot = 1 - slot;
        next = end < this.size ? read(end, slot) : null;
        onBytes(bytes.byteLength);
        yield { offset: at, bytes };
        at = end;
      }
    } finally {
      await next?.catch(() => {}); // its buffer is not reused after the caller stops
      meter?.release(2 * held);
    }
  }
}

/** Whether a 206 answers `bytes=from-` of a `total`-byte file (also web/files.js's downloads). */
export function resumes(resp, from, total) {
  const range = resp.headers.get('content-range'); // unreadable cross-origin unless exposed
  const m = range && /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(range);
  if (m) return Number(m[1]) === from && Number(m[2]) === total - 1 && (m[3] === '*' || Number(m[3]) === total);
  return Number(resp.headers.get('content-length')) === total - from;
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
  constructor(url, size = null, { attempts = 4, missing = null } = {}) {
    this.url = url;
    this.name = url;
    this.size = size;
    this.attempts = attempts;
    this.missing = missing; // (why) => the error a 404 throws (default: an InputError)
  }

  async* chunks(onBytes = () => {}, { meter = null } = {}) {
    const { url } = this;
    let { size } = this; // null: learnt from the first response (unencoded), else not resumable
    let loaded = 0;
    let etag = null;
    let cut = '';
    for (let attempt = 1; attempt === 1 || (size != null && loaded < size); attempt++) {
      if (attempt > this.attempts) {
        throw new InputError(`${url} ended after ${loaded} of ${size} bytes (${cut}) in ${attempt - 1} requests; the download was cut, retry`);
      }
      const from = loaded;
      let resp;
      try {
        resp = await fetch(url, from ? { headers: { range: `bytes=${from}-` } } : undefined);
      } catch (err) {
        cut = err.message;
        if (from) continue;
        throw new InputError(`fetching ${url} failed (${err.message}); check the URL and the connection`);
      }
      let skip = 0;
      if (from && resp.status === 206 && resumes(resp, from, size) && (etag === null || resp.headers.get('etag') === etag)) {
        // resumed where it was cut
      } else if (resp.ok && resp.status !== 206) {
        const encoded = (resp.headers.get('content-encoding') ?? 'identity') !== 'identity';
        const length = Number(resp.headers.get('content-length'));
        if (this.size == null && attempt === 1) this.size = size = !encoded && resp.headers.has('content-length') ? length : null;
        if (!encoded && resp.headers.has('content-length') && length !== size) {
          await resp.body?.cancel();
          throw new InputError(`${url} is ${length} bytes now, ${size} when its plan was read; it changed on the server: load it again`);
        }
        if (from && etag !== null && resp.headers.get('etag') !== etag) {
          await resp.body?.cancel();
          throw new InputError(`${url} changed on the server while it was read (another ETag); load it again`);
        }
        etag = resp.headers.get('etag');
        skip = from; // a server that ignored the range: the bytes in hand come again
      } else {
        await resp.body?.cancel();
        if (resp.status === 404 && !from && this.missing) throw this.missing(`HTTP 404 at ${url}`);
        throw new InputError(from ? `${url} was cut after ${from} of ${size} bytes (${cut}) and the server did not `
          + `resume it (HTTP ${resp.status}); retry` : `fetching ${url} gave HTTP ${resp.status}; check the URL`);
      }
      const reader = resp.body.getReader();
      let at = from - skip; // the file offset of the next byte of this body
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          let bytes = value;
          if (at < from) { // bytes already written (a restarted body)
            const drop = Math.min(from - at, bytes.byteLength);
            at += drop;
            bytes = bytes.subarray(drop);
            if (!bytes.byteLength) continue;
          }
          if (size != null && at + bytes.byteLength > size) throw new InputError(`${url} is longer than the ${size} bytes it had when its plan was read; load it again`);
          meter?.hold(value.byteLength);
          onBytes(bytes.byteLength);
          try {
            yield { offset: at, bytes };
          } finally {
            meter?.release(value.byteLength);
          }
          at += bytes.byteLength;
          loaded = at;
        }
        cut = 'the body ended early';
      } catch (err) {
        if (err instanceof InputError || !(err instanceof TypeError)) { reader.cancel().catch(() => {}); throw err; }
        cut = err.message;
        if (size == null) throw new InputError(`${url} was cut after ${loaded} bytes (${err.message}); its size is unknown, so it cannot resume: retry`);
      }
    }
  }
}

/**
 * A Response body of unknown layout (no byte ranges to plan from) kept as a Blob without
 * holding it: its chunks go to the browser's blob store in parts of about CHUNK_BYTES.
 * @param {AsyncIterable<{bytes: Uint8Array}>} chunks
 * @returns {Promise<Blob>}
 */
export async function blobOf(chunks) {
  const parts = [];
  let batch = [];
  let held = 0;
  const flush = () => {
    if (batch.length) parts.push(new Blob(batch));
    batch = [];
    held = 0;
  };
  for await (const { bytes } of chunks) {
    batch.push(bytes.slice()); // a chunk's buffer may be reused for the next one
    held += bytes.byteLength;
    if (held >= CHUNK_BYTES) flush();
  }
  flush();
  return new Blob(parts);
}

/**
 * A streamed file whose chunks must hold the bytes read before at `held` (`[{start, bytes}]`:
 * the ranges a plan was made from); a chunk that differs is an InputError (the file changed).
 */
export class CheckedFile {
  /** @param {UrlFile | BlobFile} file @param {{start: number, bytes: Uint8Array}[]} held */
  constructor(file, held) {
    this.file = file;
    this.held = held;
    this.name = file.name;
    this.size = file.size;
  }

  readSync(start, stop) { return this.file.readSync(start, stop); }

  async* chunks(onBytes, options) {
    for await (const chunk of this.file.chunks(onBytes, options)) {
      const end = chunk.offset + chunk.bytes.byteLength;
      for (const h of this.held) {
        const a = Math.max(h.start, chunk.offset);
        const b = Math.min(h.start + h.bytes.byteLength, end);
        for (let i = a; i < b; i++) {
          if (chunk.bytes[i - chunk.offset] !== h.bytes[i - h.start]) {
            throw new InputError(`${this.name} changed on the server after its plan was read (byte ${i} differs); load it again`);
          }
        }
      }
      yield chunk;
    }
  }
}
