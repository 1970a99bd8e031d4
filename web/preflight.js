// Before a program's weights are downloaded: Python reads only the program's flatbuffer
// regions (the .pte header, the program flatbuffer, each delegate's VK00 header and graph),
// fetched here with HTTP Range requests, plans the method and says what the plan needs
// (py/webpte/preflight.py); this module checks that against the device, so a program that
// cannot run is refused before a large download. Cached and local files are not downloaded,
// so they are not preflighted.
// Python reads synchronously, so network ranges are read with synchronous XHR: this runs in
// the worker, whose thread is Python's anyway.

import { AdapterLimitsError, WebpteError } from './errors.js';
import { CACHE_NAME, LocalFolder } from './files.js';
import { plannerLimits, resolveLimits } from './limits.js';
import { callPy, planFeatures, sharedDevice } from './runtime.js';
import { CheckedFile, RangedFile } from './sources.js';

const MIN_READ = 4096; // a read extends to at least this many bytes: headers come with what follows


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

async function isCached(url, cache) {
  if (!cache || typeof caches === 'undefined') return false;
  try {
    return !!(await (await caches.open(CACHE_NAME)).match(url));
  } catch {
    return false; // storage disabled: the file is downloaded
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
 * Check what the plan of the program at `url` needs against the device before the file is
 * downloaded. A file in the Cache API (`cache`) is not downloaded, so it is not preflighted
 * (the load plans it once). Returns `{needs, fetched, reads, bytes_read, file_size, plan_ms}`,
 * or `{skipped}` when there is nothing to download or the ranges could not be read (the
 * download then goes ahead; the load checks the limits).
 * @param {string} url
 * @param {{glue: any, method?: string, fusion?: string, features?: string[], cache?: boolean,
 *   limits?: Record<string, number> | null, data?: string[]}} options `limits` caps the device's limits
 *   (WebGPU names; `deviceMemory`: a byte budget for the plan's buffers, which WebGPU does not report);
 *   `data`: the URLs of the program's external data files (`.ptd`), read by ranges too
 * @returns {Promise<object>}
 * @throws {AdapterLimitsError} the plan needs more than the device (or `limits`) allows
 * @throws {WebpteError} the program cannot be planned (read from the server's bytes)
 */
export async function preflightProgram(url, { glue, method = 'forward', fusion = 'all', features = null, cache = false, limits = null, data = [] }) {
  features ??= await planFeatures();
  limits = resolveLimits(limits);
  if (await isCached(url, cache)) return { skipped: 'the file is cached: nothing to download' };
  const opened = await urlRanges(url);
  if (opened.skipped) return { skipped: opened.skipped };
  const { ranges } = opened;
  // The external data files' ranges too: the plan names their byte ranges.
  const dataRanges = [];
  for (const u of data) {
    const o = await urlRanges(u);
    if (o.skipped) return { skipped: o.skipped };
    dataRanges.push({ url: u, ranges: o.ranges });
  }
  const device = await sharedDevice({});
  const py = glue.RangeSource(ranges.size, (start, stop) => ranges.read(start, stop));
  const pyData = dataRanges.map((d) => glue.RangeSource(d.ranges.size, (start, stop) => d.ranges.read(start, stop), d.url));
  let out;
  const t0 = performance.now();
  try {
    out = callPy(() => glue.preflight_program(py, method, features, fusion, plannerLimits(limits), pyData), 'the preflight plan');
    out.plan_total_ms = performance.now() - t0;   // with the Range reads it waited for
  } catch (err) {
    // A read that failed says nothing about the program, and neither does a bug of the
    // preflight (a plain WebpteError from callPy): the load goes ahead and finds what is wrong.
    const failure = ranges.failure ?? dataRanges.find((d) => d.ranges.failure)?.ranges.failure
      ?? (err.constructor === WebpteError ? err : null);
    if (failure) return { skipped: `the preflight could not plan the program (${failure.message.split('\n')[0]})` };
    throw err;
  } finally {
    py.destroy();
    for (const p of pyData) p.destroy();
  }
  const allowed = allowedLimits(device.limits, limits);
  for (const [snake, needed] of Object.entries(out.needs)) {
    const name = camel(snake);
    const have = allowed(name);
    if (have != null && needed > have) {
      const what = name === 'deviceMemory' ? `${needed} bytes of device memory, the budget is ${have}`
        : `${name} = ${needed}, this device allows ${have}`;
      throw new AdapterLimitsError(`the program's plan needs ${what}; refused before downloading its `
        + `weights (${ranges.fetched} of ${ranges.size} bytes were read). `
        + 'Use a GPU (or browser) with larger WebGPU limits, or a smaller program', { limit: name, needed, allowed: have });
    }
  }
  // `held` (not enumerable: stats stay plain) lets takePlan check the download against it;
  // `ranges` answer later reads of the same files (a streamed load plans from them).
  const answer = Object.defineProperty({ ...out, fetched: ranges.fetched, reads: ranges.reads }, 'held', { value: ranges.held });
  Object.defineProperty(answer, 'ranges', { value: ranges });
  if (dataRanges.length) answer.data_fetched = dataRanges.map((d) => d.ranges.fetched);
  return Object.defineProperty(answer, 'dataHeld', { value: dataRanges.map((d) => ({ size: d.ranges.size, held: d.ranges.held, ranges: d.ranges })) });
}

/**
 * Preflight the programs (decoder, vision) of a model folder at a URL before any of its files
 * is downloaded: `{[role]: preflightProgram's answer}`; a local folder has nothing to download.
 * @param {import('./files.js').UrlFolder | LocalFolder} folder
 * @param {{files: {name: string, role: string}[]}} manifest web_glue.model_manifest's answer
 * @param {{glue: any, fusion?: string, cache?: boolean, limits?: Record<string, number> | null}} options
 * @throws {AdapterLimitsError | WebpteError}
 */
export async function preflightModel(folder, manifest, { glue, fusion = 'all', cache = true, limits = null }) {
  if (folder instanceof LocalFolder) return null;
  const out = {};
  for (const spec of manifest.files.filter((f) => f.role === 'decoder' || f.role === 'vision')) {
    const data = manifest.files.filter((f) => f.role === `${spec.role}_data`).map((f) => folder.url(f.name));
    out[spec.role] = await preflightProgram(folder.url(spec.name), { glue, fusion, cache, limits, data });
  }
  return out;
}

/**
 * The files of a preflighted program as streamed sources (web/sources.js), each checked
 * against the ranges the plan was read from as its chunks pass, and the preflight's plan;
 * null when the preflight made none. The plan is taken out of `preflighted`.
 * @param {object | null} preflighted preflightProgram's answer
 * @param {string} url @param {string[]} data the data files' URLs, in the preflight's order
 * @param {{chunkBytes?: number}} [options] bytes a Range request reads
 * @returns {{files: CheckedFile[], planned: object} | null}
 */
export function streamPlanned(preflighted, url, data = [], { chunkBytes } = {}) {
  const planned = preflighted?.planned ?? null;
  if (!planned || !preflighted.ranges) return null;
  delete preflighted.planned;
  const file = (u, ranges) => new CheckedFile(new RangedFile(u, ranges.size, (a, b) => ranges.read(a, b), { chunkBytes }), ranges.held);
  const files = [file(url, preflighted.ranges), ...preflighted.dataHeld.map((d, k) => file(data[k], d.ranges))];
  const { plan_ms, plan_total_ms, bytes_read } = preflighted;
  return { files, planned: { ...planned, plan_ms, plan_total_ms, bytes_read } };
}

/**
 * The plan a preflight made, for the downloaded `bytes` of the same file (the same size, and
 * the same bytes wherever Python read ranges), so the load does not plan the program again;
 * null when there is none or the file differs. It is taken out of `preflighted` (stats keep
 * the figures, not the plan).
 * @param {object | null} preflighted preflightProgram's answer
 * @param {ArrayBuffer} bytes
 * @param {ArrayBuffer[]} [data] the downloaded external data files, in the preflight's order
 * @returns {{plan: string, position_input: number[] | null, dynamic: boolean, plan_ms: number,
 *   plan_total_ms: number, bytes_read: number} | null}
 */
export function takePlan(preflighted, bytes, data = []) {
  const planned = preflighted?.planned ?? null;
  if (preflighted) delete preflighted.planned;
  if (!planned || preflighted.file_size !== bytes.byteLength) return null;
  // The plan holds for these bytes only if every range Python read is what was downloaded.
  const dataHeld = preflighted.dataHeld ?? [];
  if (dataHeld.length !== data.length || dataHeld.some((d, k) => d.size !== data[k].byteLength)) return null;
  const same = (content, held) => {
    const file = new Uint8Array(content);
    return held.every(({ start, bytes: seen }) => {
      const got = file.subarray(start, start + seen.length);
      return got.length === seen.length && got.every((b, i) => b === seen[i]);
    });
  };
  if (!same(bytes, preflighted.held ?? []) || dataHeld.some((d, k) => !same(data[k], d.held))) return null;
  const { plan_ms, plan_total_ms, bytes_read } = preflighted;
  return { ...planned, plan_ms, plan_total_ms, bytes_read };
}
