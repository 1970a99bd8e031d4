// A stand-in for webpte's model API (loadModel, checkCapabilities, the typed errors; the cache
// helpers are webpte's own): one
// browser test serves it as /index.js for the picture controls, which need a model with a
// vision program (the SmolVLM files cannot be had offline). It fetches and checks a model folder like the real API
// (progress, sha256, .pte header), streams a canned answer and records each generate() call
// in `globalThis.standInCalls`. Test harness only: never part of the site.
import { InputError, NoWebGPUError, PteFormatError, WebpteError } from './errors.js';

export * from './errors.js';
export { deleteModelFromCache, hasModelInCache, listCachedModels } from './cache.js';
export class HashMismatchError extends WebpteError {}
export class ContextFullError extends WebpteError {}
export class QuotaError extends WebpteError {}

export async function checkCapabilities() {
  const adapter = await navigator.gpu?.requestAdapter();
  if (!adapter) {
    return { webgpu: false, adapter: null, limits: {}, features: [], wgslFeatures: [], problems: ['navigator.gpu is missing: this browser has no WebGPU'], warnings: [] };
  }
  const limits = {};
  for (const k in adapter.limits) limits[k] = adapter.limits[k];
  return {
    webgpu: true, adapter: { vendor: adapter.info.vendor, architecture: adapter.info.architecture, description: adapter.info.description }, limits, features: [...adapter.features],
    wgslFeatures: [...navigator.gpu.wgslLanguageFeatures], problems: [], warnings: ['the WebGPU adapter is a software fallback: generation will be slow'],
  };
}

async function hex(bytes) {
  return [...new Uint8Array(await crypto.subtle.digest('SHA-256', bytes))].map((b) => b.toString(16).padStart(2, '0')).join('');
}

function checkPte(name, bytes) {
  const v = new DataView(bytes);
  const magic = new TextDecoder().decode(new Uint8Array(bytes, 4, 4));
  if (magic !== 'ET12') throw new PteFormatError(`${name}: file identifier is ${JSON.stringify(magic)}, expected "ET12"`);
  const end = Number(v.getBigUint64(24, true) + v.getBigUint64(32, true));
  if (bytes.byteLength < end) throw new PteFormatError(`${name}: the segment data ends at byte ${end} but the file has ${bytes.byteLength}`);
}

async function readAll(open, onChunk = () => {}) {
  const resp = await open();
  const chunks = [];
  let loaded = 0;
  const reader = (resp.body ?? resp.stream()).getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    loaded += value.length;
    onChunk(value.length);
  }
  const out = new Uint8Array(loaded);
  let at = 0;
  for (const c of chunks) { out.set(c, at); at += c.length; }
  return out.buffer;
}

export async function loadModel(source, { onProgress } = {}) {
  let open;
  let size;
  if (typeof source === 'string') {
    open = async (name) => {
      const resp = await fetch(new URL(name, source));
      if (!resp.ok) throw new InputError(`fetching ${name} gave HTTP ${resp.status}; check the URL`);
      return resp;
    };
    size = async (name) => Number((await fetch(new URL(name, source), { method: 'HEAD' })).headers.get('content-length'));
  } else if (source?.files) {
    const byPath = new Map([...source.files].map((f) => [f.webkitRelativePath.split('/').slice(1).join('/') || f.name, f]));
    open = async (name) => {
      if (!byPath.has(name)) throw new InputError(`the folder has no ${name}`);
      return byPath.get(name);
    };
    size = async (name) => (await open(name)).size;
  } else throw new InputError('loadModel takes a base URL or {files}');
  const meta = JSON.parse(new TextDecoder().decode(await readAll(() => open('webpte_model.json'))));
  const names = Object.keys(meta.sha256 ?? {});
  let total = 0;
  for (const name of names) total += await size(name);
  const t0 = performance.now();
  let loaded = 0;
  for (const name of names) {
    const bytes = await readAll(() => open(name), (n) => {
      loaded += n;
      const rate = loaded / Math.max(1, performance.now() - t0);
      onProgress?.({ stage: 'fetch', file: name, loaded, total, etaSeconds: (total - loaded) / rate / 1000 });
    });
    onProgress?.({ stage: 'verify', file: name, loaded, total });
    if ((await hex(bytes)) !== meta.sha256[name]) throw new HashMismatchError(`${name} does not match its sha256 in webpte_model.json`);
    if (name.endsWith('.pte')) checkPte(name, bytes);
  }
  for (const stage of ['python', 'plan', 'upload', 'compile', 'ready']) onProgress?.({ stage });
  return new FakeModel(meta);
}

class FakeModel {
  rows = 0;
  maxContext = 2048;

  constructor(meta) {
    this.name = meta.name;
    this.hasVision = meta.vision != null;
  }

  async *generate({ prompt, image = null, maxNewTokens = 128, signal }) {
    (globalThis.standInCalls ??= []).push({ prompt, image: image && { type: image.type, size: image.size } });
    const answer = /capital of France/i.test(prompt) ? 'The capital of France is Paris.' : 'I am a stand-in model for the page\'s tests.';
    const pieces = answer.split(/(?= )/).slice(0, maxNewTokens);
    const promptRows = this.rows + 20 + prompt.length;
    const t0 = performance.now();
    for (const piece of pieces) {
      await new Promise((r) => setTimeout(r, 40));
      if (signal?.aborted) break;
      yield { type: 'text', text: piece };
    }
    const decodeS = (performance.now() - t0) / 1000;
    const stopReason = signal?.aborted ? 'aborted' : 'stop_token';
    const reusedRows = this.rows;
    this.rows = promptRows + pieces.length;
    yield {
      type: 'done', tokenIds: pieces.map((_, i) => i), promptRows, reusedRows, computedRows: promptRows - reusedRows,
      newTokens: pieces.length, prefillTokensPerSecond: 123.4, decodeTokensPerSecond: pieces.length / decodeS, stopReason,
    };
  }

  reset() { this.rows = 0; }

  async dispose() {}
}
