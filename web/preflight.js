// Before a program's weights are downloaded: Python reads only the program's flatbuffer
// regions (the .pte header, the program flatbuffer, each delegate's VK00 header and graph),
// fetched here with HTTP Range requests (or sliced from a cached or local file), plans the
// method and says what the plan needs (py/webpte/preflight.py); this module checks that
// against the device, so a program that cannot run is refused before a large download.
// Python reads synchronously, so network ranges are read with synchronous XHR: this runs in
// the worker, whose thread is Python's anyway.

import { AdapterLimitsError, InputError, WebpteError } from './errors.js';
import { CACHE_NAME, LocalFolder } from './files.js';
import { callPy, sharedDevice } from './runtime.js';

const MIN_READ = 4096; // a read extends to at least this many bytes: headers come with what follows

/** WGSL language features of this browser (the planner picks kernel variants by them). */
const wgslFeatures = () => [...(navigator.gpu?.wgslLanguageFeatures ?? [])];

/** snake_case need -> WebGPU's camelCase limit name (device_memory -> deviceMemory). */
const camel = (name) => name.replace(/_([a-z])/g, (_, c) => c.toUpperCase());

/**
 * Byte ranges of one file, read on demand and kept: `read(start, stop)` answers from what was
 * read before and reads only what is missing. `fetched` counts the bytes read from the source.
 */
class Ranges {
  /** @param {number} size @param {(start: number, stop: number) => Uint8Array} readRaw */
  constructor(size, readRaw) {
    this.size = size;
    this.readRaw = readRaw;
    /** @type {{start: number, bytes: Uint8Array}[]} sorted, disjoint */
    this.held = [];
    this.fetched = 0;
    this.reads = 0;
    this.failure = null;
  }

  read(start, stop) {
    const out = new Uint8Array(stop - start);
    let at = start;
    for (const h of this.held) {
      const end = h.start + h.bytes.length;
      if (end <= at) continue;
      if (h.start > at) break;
      const n = Math.min(end, stop) - at;
      out.set(h.bytes.subarray(at - h.start, at - h.start + n), at - start);
      at += n;
      if (at >= stop) return out;
    }
    const next = this.held.find((h) => h.start > at);
    const until = Math.min(this.size, next ? next.start : this.size, Math.max(stop, at + MIN_READ));
    let bytes;
    try {
      bytes = this.readRaw(at, Math.max(until, stop));
    } catch (err) {
      this.failure ??= err; // Python sees a failed read as an exception of its own
      throw err;
    }
    this.reads++;
    this.fetched += bytes.length;
    this.held.push({ start: at, bytes });
    this.held.sort((a, b) => a.start - b.start);
    return this.read(start, stop);
  }
}

/** Why a preflight could not read its ranges (it is then skipped, never fatal). */
class Unreadable extends Error {}

/** Ranges of a Blob (a local or cached file), read with FileReaderSync. @param {Blob} blob */
function blobRanges(blob) {
  const reader = new FileReaderSync();
  return new Ranges(blob.size, (a, b) => new Uint8Array(reader.readAsArrayBuffer(blob.slice(a, b))));
}

/** One synchronous Range request: the bytes, or Unreadable when the server did not answer 206. */
function rangeRequest(url, start, stop) {
  const xhr = new XMLHttpRequest();
  xhr.open('GET', url, false);
  xhr.responseType = 'arraybuffer';
  xhr.setRequestHeader('Range', `bytes=${start}-${stop - 1}`);
  try {
    xhr.send();
  } catch (err) {
    throw new Unreadable(`the Range request failed (${err.message})`);
  }
  const bytes = new Uint8Array(xhr.response ?? new ArrayBuffer(0));
  if (xhr.status !== 206 || bytes.length !== stop - start) {
    throw new Unreadable(`the server answered a Range request with HTTP ${xhr.status} (${bytes.length} bytes)`);
  }
  return bytes;
}

/**
 * Ranges of a file at `url`, or null (with why) when the server does not serve byte ranges.
 * The first request reads the file's head and learns its size; a server that ignores the
 * range gets its response body cancelled, so nothing more is downloaded.
 * @param {string} url
 */
async function urlRanges(url) {
  let resp;
  try {
    resp = await fetch(url, { headers: { range: `bytes=0-${MIN_READ - 1}` } });
  } catch (err) {
    return { skipped: `fetching ${url} failed (${err.message})` };
  }
  const m = /^bytes 0-(\d+)\/(\d+)$/.exec(resp.headers.get('content-range') ?? '');
  if (resp.status !== 206 || !m) {
    await resp.body?.cancel();
    return { skipped: `the server does not serve byte ranges of ${url} (HTTP ${resp.status})` };
  }
  const head = new Uint8Array(await resp.arrayBuffer());
  const ranges = new Ranges(Number(m[2]), (a, b) => rangeRequest(url, a, b));
  ranges.held.push({ start: 0, bytes: head });
  ranges.fetched = head.length;
  ranges.reads = 1;
  return { ranges };
}

async function cachedBlob(url, cache) {
  if (!cache || typeof caches === 'undefined') return null;
  try {
    const hit = await (await caches.open(CACHE_NAME)).match(url);
    return hit ? await hit.blob() : null;
  } catch {
    return null; // storage disabled: read over the network
  }
}

/**
 * The limits a plan may use on this worker's device, each capped by `caps` (WebGPU names;
 * `deviceMemory`: a budget in bytes for all of a plan's buffers, which WebGPU does not report).
 * @param {GPUSupportedLimits} limits @param {Record<string, number>} caps
 */
function allowedLimits(limits, caps) {
  return (name) => {
    const have = limits[name];
    const cap = caps?.[name];
    if (cap == null) return have;
    return have == null ? cap : Math.min(have, cap);
  };
}

/**
 * Check what the plan of `method` needs against the device before the file is downloaded.
 * `where`: `{url, cache}` (cached bytes are used if there, else Range requests) or `{blob}`.
 * Returns `{needs, fetched, reads, bytes_read, file_size, plan_ms, source}` or `{skipped}` when
 * the ranges could not be read (the download then goes ahead; the load checks the limits).
 * @param {{url?: string, cache?: boolean, blob?: Blob}} where
 * @param {{glue: any, method?: string, fusion?: string, features?: string[],
 *   limits?: Record<string, number> | null}} options
 * @returns {Promise<object>}
 * @throws {AdapterLimitsError} the plan needs more than the device (or `limits`) allows
 * @throws {WebpteError} the program cannot be planned (read from the server's bytes)
 */
export async function preflightProgram(where, { glue, method = 'forward', fusion = 'all', features = wgslFeatures(), limits = null }) {
  if (limits != null && (typeof limits !== 'object'
      || !Object.values(limits).every((v) => typeof v === 'number' && v >= 0))) {
    throw new InputError('limits must be an object of WebGPU limit names (and deviceMemory) to non-negative numbers');
  }
  let source = 'file';
  let blob = where.blob ?? null;
  if (!blob && where.url) {
    blob = await cachedBlob(where.url, where.cache);
    source = blob ? 'cache' : 'network';
  }
  let ranges;
  if (blob) ranges = blobRanges(blob);
  else {
    const opened = await urlRanges(where.url);
    if (opened.skipped) return { skipped: opened.skipped };
    ranges = opened.ranges;
  }
  const device = await sharedDevice({});
  const py = glue.RangeSource(ranges.size, (start, stop) => ranges.read(start, stop));
  let out;
  try {
    out = callPy(() => glue.preflight_program(py, method, features, fusion), 'the preflight plan');
  } catch (err) {
    // A cached entry may be corrupt (the load verifies it and fetches it again), a read that
    // failed says nothing about the program, and neither does a bug of the preflight
    // (a plain WebpteError from callPy): the load goes ahead and finds what is wrong.
    const failure = ranges.failure ?? (source === 'cache' || err.constructor === WebpteError ? err : null);
    if (failure) return { skipped: `the preflight could not plan the program (${failure.message.split('\n')[0]})` };
    throw err;
  } finally {
    py.destroy();
  }
  const allowed = allowedLimits(device.limits, limits);
  for (const [snake, needed] of Object.entries(out.needs)) {
    const name = camel(snake);
    const have = allowed(name);
    if (have != null && needed > have) {
      const what = name === 'deviceMemory' ? `${needed} bytes of device memory, the budget is ${have}`
        : `${name} = ${needed}, this device allows ${have}`;
      throw new AdapterLimitsError(`the program's plan needs ${what}; refused before downloading its `
        + `weights (${source === 'network' ? `${ranges.fetched} of ${ranges.size} bytes were read` : 'nothing was downloaded'}). `
        + 'Use a GPU (or browser) with larger WebGPU limits, or a smaller program', { limit: name, needed, allowed: have });
    }
  }
  return { ...out, fetched: ranges.fetched, reads: ranges.reads, source };
}

/**
 * Preflight the programs of a model folder (decoder, vision) before any of its files is read:
 * `{[role]: preflightProgram's answer}`.
 * @param {import('./files.js').UrlFolder | LocalFolder} folder
 * @param {{files: {name: string, role: string}[]}} manifest web_glue.model_manifest's answer
 * @param {{glue: any, fusion?: string, cache?: boolean, limits?: Record<string, number> | null}} options
 * @throws {AdapterLimitsError | WebpteError}
 */
export async function preflightModel(folder, manifest, { glue, fusion = 'all', cache = true, limits = null }) {
  const out = {};
  for (const spec of manifest.files.filter((f) => f.role === 'decoder' || f.role === 'vision')) {
    let where;
    if (folder instanceof LocalFolder) {
      const blob = folder.find(spec.name);
      if (!blob) continue; // the load reports the missing file with the others
      where = { blob };
    } else {
      where = { url: folder.url(spec.name), cache };
    }
    out[spec.role] = await preflightProgram(where, { glue, fusion, limits });
  }
  return out;
}
