// Models in the page: a model folder (decoder + optional vision program, int8 embeddings,
// tokenizer, meta) loaded into the shared worker, and streamed generation.
//
//   const caps = await checkCapabilities();          // before any download
//   const model = await loadModel('https://host/models/smolvlm/', { onProgress });
//   for await (const ev of model.generate({ prompt: 'What animal is this?', image: file })) {
//     if (ev.type === 'text') out.textContent += ev.text; else console.log(ev.stopReason);
//   }
//   model.reset();            // a new conversation; otherwise follow-ups reuse the KV cache
//   await model.dispose();

import { Completions } from './chat.js';
import { resolveURL, runtime } from './client.js';
import { DisposedError, InputError } from './errors.js';
import { imagePixels } from './image.js';

/**
 * @typedef {object} TextEvent a piece of the answer
 * @property {'text'} type
 * @property {string} text
 */
/**
 * @typedef {object} DoneEvent the end of a turn
 * @property {'done'} type
 * @property {number[]} tokenIds generated ids
 * @property {string} text the whole answer
 * @property {number} promptRows positions of the conversation's prompt
 * @property {number} reusedRows positions kept in the KV cache from earlier turns
 * @property {number} computedRows prompt positions fed through the decoder
 * @property {number} prefillWindows the prompt's decoder windows
 * @property {number} prefillWindowsRun of them, those computed (fewer when aborted during prefill)
 * @property {number} prefillSubmits GPU submits they took (sized so an abort is seen about every 0.25 s)
 * @property {number} newTokens
 * @property {number} prefillTokensPerSecond
 * @property {number} decodeTokensPerSecond
 * @property {number} prefillSeconds
 * @property {number} decodeSeconds
 * @property {number} visionSeconds
 * @property {number} samplingSeconds of decodeSeconds, in the Python sampler
 * @property {'stop_token' | 'stop_sequence' | 'max_new_tokens' | 'context_full' | 'aborted'} stopReason
 */
/** @typedef {TextEvent | DoneEvent} GenerateEvent */
/**
 * @typedef {object} Capabilities what `checkCapabilities` finds
 * @property {boolean} webgpu
 * @property {{vendor: string, architecture: string, device: string, description: string,
 *   isFallbackAdapter: boolean} | null} adapter
 * @property {Record<string, number>} limits
 * @property {string[]} features
 * @property {string[]} wgslFeatures
 * @property {string[]} problems why models cannot run here (empty: they can)
 * @property {string[]} warnings what will be slow or not kept
 */

/**
 * Load a model folder into the page's webpte worker: fetch (or read) every file, check the
 * pinned sha256 values, boot Python, plan and upload the programs.
 *
 * A folder is either webpte's layout (`webpte_model.json` naming the files, with their sha256)
 * or the published SmolVLM repo's (`smolvlm_decoder_q8.pte`, `smolvlm_vision_q8.pte`,
 * `embed_tokens.i8.bin`, `embed_tokens.scale.f32.bin`, `vlm_meta.json`, `tokenizer/...`, checked
 * against the pinned hashes). Fetched files with a pinned hash are kept in the Cache API
 * (`CACHE_NAME`); a cached copy that fails its hash is fetched again.
 *
 * @param {string | URL | {files: File[] | FileList}} source the folder's base URL (file `name` is
 *   fetched from `${base}${name}`; a missing trailing '/' is added), or local files (e.g. from
 *   `<input type=file webkitdirectory>` or a drop) matched by relative path, else by name
 * @param {object} [options]
 * @param {(event: {stage: 'fetch'|'verify'|'cache'|'python'|'plan'|'upload'|'compile'|'ready', file?: string,
 *   loaded?: number, total?: number, fileLoaded?: number, fileTotal?: number, etaSeconds?: number | null,
 *   stored?: false, error?: {name: 'QuotaError' | 'WebpteError', message: string}}) => void}
 *   [options.onProgress] `fetch`: `loaded`/`total` bytes over all files of the model (the
 *   programs' bytes count as they stream into the GPU, after `upload`); `verify` of the held files:
 *   `fileLoaded`/`fileTotal` of `file`, `etaSeconds` at the network rate (null until known);
 *   plan/upload/compile come once per program (decoder, then vision); `cache` (`stored: false`,
 *   `error`) when the browser refused to store `file`: the model loads without it cached
 * @param {boolean} [options.verify] check pinned sha256 values (default true)
 * @param {boolean} [options.cache] keep fetched files in the Cache API (default true)
 * @param {'all' | 'elementwise' | 'none'} [options.fusion] how much the planner fuses
 *   (default 'all'; see loadProgram)
 * @param {boolean} [options.preflight] before any file is downloaded, plan the programs from
 *   their flatbuffer ranges (HTTP Range requests) and check the device's limits (default true)
 * @param {'default' | Record<string, number> | null} [options.limits] 'default': the programs
 *   are planned for and run on a device with WebGPU's default limits (weights past a binding
 *   are split); an object caps some limits the same way
 *   (e.g. `{maxStorageBufferBindingSize: 2 ** 27}`), and `deviceMemory`, a budget in bytes for a
 *   program's buffers, checked by the preflight (of files to download: cached and local files
 *   are not preflighted)
 * @param {boolean} [options.autotune] time the decoder's decode kernel variants on this adapter
 *   once (cached per adapter and program; see loadProgram) and plan the fastest
 * @param {number} [options.chunkBytes] bytes the programs' files are read in (see loadProgram):
 *   the decoder and vision programs and their data files stream from the network, the cache
 *   or the local file into the GPU buffers, checked against their pinned sha256 as they pass
 *   (a file that fails is neither used nor cached); the embedding table is kept as a Blob,
 *   checked in chunks of this size and read by rows as windows need them; the other files are held
 * @returns {Promise<Model>}
 * @throws {ModelFolderError | HashMismatchError | InputError | PteFormatError |
 *   UnsupportedOpError | PlanError | AdapterError | AdapterLimitsError | WorkerError}
 */
export async function loadModel(source, { onProgress, verify = true, cache = true, fusion = 'all', preflight = true, limits = null, autotune = false, chunkBytes = undefined } = {}) {
  let content;
  if (source instanceof URL) source = source.href;
  if (typeof source === 'string') {
    const url = resolveURL(source);
    content = { base: url.endsWith('/') ? url : `${url}/` };
  } else if (source && typeof source === 'object' && source.files && typeof source.files.length === 'number') {
    const files = Array.from(source.files);
    if (!files.length || !files.every((f) => typeof Blob !== 'undefined' && f instanceof Blob)) {
      throw new InputError('loadModel({files}) takes the File objects of the model folder (a FileList or an array)');
    }
    content = { files };
  } else {
    throw new InputError('loadModel takes a base URL string of a model folder or {files: File[] | FileList}');
  }
  const client = runtime();
  if (chunkBytes !== undefined && !(Number.isSafeInteger(chunkBytes) && chunkBytes > 0)) throw new InputError('chunkBytes is a positive number of bytes');
  const info = await client.request('loadModel', { ...content, verify: !!verify, cache: !!cache, fusion, preflight: !!preflight, limits, autotune: !!autotune, chunkBytes }, { onEvent: onProgress });
  return new Model(client, info);
}

/** A loaded model. Make it with `loadModel`. */
export class Model {
  /** @private */
  constructor(client, info) {
    /** @private */
    this.client = client;
    /** @private @type {number} */
    this.handle = info.handle;
    /** Name from the meta file. @type {string} */
    this.name = info.name;
    /** 'webpte' or 'smolvlm' (the folder layout). @type {string} */
    this.layout = info.layout;
    /** Whether the model takes an image (it has a vision program). @type {boolean} */
    this.hasVision = info.vision;
    /** [height, width] the vision program takes, or null. @type {[number, number] | null} */
    this.imageSize = info.imageSize;
    /** Positions of the decoder's context (prompt + answer of every turn of a conversation). @type {number} */
    this.maxContext = info.maxContext;
    /** Load statistics (ms): fetch_ms, load_ms, per program plan/upload/pipelines timings. @type {Record<string, any>} */
    this.stats = info.stats;
    this.disposed = false;
    /** @private @type {Set<AbortController>} generations in flight (dispose stops them) */
    this.running = new Set();
    /** @private @type {Set<string>} data:/blob: image URLs (fixed content) whose pixels the worker holds */
    this.imagesSent = new Set();
    /**
     * OpenAI-style chat completions (web/chat.js): `model.chat.completions.create({messages, stream, ...})`.
     * @type {{completions: Completions}}
     */
    this.chat = { completions: new Completions(this, (req, opts) => this.#chatEvents(req, opts)) };
  }

  /**
   * Answer `prompt` (optionally about `image`) in this conversation. Yields
   * `{type: 'text', text}` pieces as they are decoded (a partial UTF-8 character is held back),
   * then one `{type: 'done', tokenIds, text, promptRows, reusedRows, computedRows, newTokens,
   * prefillTokensPerSecond, decodeTokensPerSecond, prefillSeconds, decodeSeconds, visionSeconds,
   * samplingSeconds (of decodeSeconds, in the Python sampler), stopReason: 'stop_token'|
   * 'max_new_tokens'|'context_full'|'aborted'}`. Follow-up calls reuse
   * the KV cache of earlier turns (`reusedRows`); `reset()` starts a new conversation. Leaving
   * the loop early stops the generation (the turn keeps what was generated).
   * @param {object} options
   * @param {string} options.prompt the user's message
   * @param {ImageBitmapSource} [options.image] a picture (File/Blob, <img>, canvas, ImageBitmap,
   *   ImageData) for a model with a vision program; resized to `imageSize` by the browser
   * @param {number} [options.maxNewTokens] default 256
   * @param {number} [options.temperature] 0 (default) is greedy
   * @param {number} [options.topK] 0 (default): no limit
   * @param {number} [options.topP] default 1
   * @param {number} [options.repetitionPenalty] default 1 (none)
   * @param {number} [options.seed] seed of the sampler (same seed, same tokens)
   * @param {AbortSignal} [options.signal] stops generation: the done event says 'aborted'
   * @returns {AsyncGenerator<GenerateEvent>}
   * @throws {ContextFullError | InputError | TemplateError | DeviceLostError | DisposedError}
   */
  async *generate({ prompt, image = null, maxNewTokens = 256, temperature = 0, topK = 0, topP = 1,
    repetitionPenalty = 1, seed = null, signal } = {}) {
    if (this.disposed) throw new DisposedError('this model was disposed; load it again');
    if (typeof prompt !== 'string') throw new InputError('generate({prompt}) takes the message as a string');
    const options = { maxNewTokens, temperature, topK, topP, repetitionPenalty, seed };
    for (const [k, v] of Object.entries(options)) {
      if (v != null && !Number.isFinite(v)) throw new InputError(`generate(): ${k} must be a finite number, got ${v}`);
    }
    let pixels = null;
    const transfer = [];
    if (image != null) {
      if (!this.hasVision) throw new InputError(`model ${this.name} has no vision program; it takes text only`);
      pixels = await this.#pixels(image);
      transfer.push(pixels.data.buffer);
    }
    yield* this.#events({ prompt, image: pixels, ...options }, { transfer, signal });
  }

  /** RGBA pixels at the vision program's size, in a buffer the worker may own. */
  async #pixels(image) {
    const [h, w] = this.imageSize;
    const px = await imagePixels(image, h, w);
    return { data: new Uint8Array(px.data), height: h, width: w };
  }

  /**
   * A chat request (chat.js `chatRequest`) as worker events: images by URL. A data: or blob: URL
   * names fixed content and is sent once; any other URL is fetched for every request, since what
   * it serves may change (the worker knows images by a hash of their pixels, and runs the
   * vision program once per picture).
   */
  async *#chatEvents(req, { signal }) {
    if (this.disposed) throw new DisposedError('this model was disposed; load it again');
    const urls = [...req.history.map((m) => m.image), req.image].filter((u) => u != null);
    const images = {};
    const transfer = [];
    for (const url of new Set(urls)) {
      if (this.imagesSent.has(url)) continue; // only data: and blob: URLs are kept
      let blob;
      try {
        blob = await (await fetch(url)).blob();
      } catch (err) {
        throw new InputError(`the image ${url.slice(0, 80)} could not be fetched (${err.message}); pass a data:, blob: or same-origin URL`);
      }
      images[url] = await this.#pixels(blob);
      transfer.push(images[url].data.buffer);
    }
    const content = { prompt: req.prompt, history: req.history, imageKey: req.image, images, stop: req.stop, ...req.options };
    try {
      yield* this.#events(content, { transfer, signal });
    } finally {
      for (const url of Object.keys(images)) if (/^(data|blob):/i.test(url)) this.imagesSent.add(url);
    }
  }

  /** Stream one `generate` request's events, then its done event. */
  async *#events(content, { transfer, signal }) {
    const stop = new AbortController();
    this.running.add(stop);
    const signals = signal ? AbortSignal.any([signal, stop.signal]) : stop.signal;
    const queue = [];
    let wake = null;
    let settled = null;
    const ping = () => { wake?.(); wake = null; };
    this.client.request('generate', { handle: this.handle, ...content },
      { transfer, signal: signals, onEvent: (e) => { queue.push(e); ping(); } })
      .then((done) => { settled = { done }; }, (error) => { settled = { error }; })
      .finally(ping);
    try {
      for (;;) {
        if (queue.length) {
          yield queue.shift();
        } else if (settled) {
          if (settled.error) throw settled.error;
          yield settled.done;
          return;
        } else {
          await new Promise((r) => { wake = r; });
        }
      }
    } finally {
      if (!settled) stop.abort(); // the loop was left early
      this.running.delete(stop);
    }
  }

  /**
   * Start a new conversation (forget the turns, zero the KV cache). Requests are served in
   * order, so a generate() after reset() sees the new conversation without awaiting this.
   * @returns {Promise<void>}
   */
  reset() {
    if (this.disposed) return Promise.reject(new DisposedError('this model was disposed; load it again'));
    return this.client.request('resetModel', { handle: this.handle });
  }

  /**
   * Free the model's GPU memory and files in the worker; a generation in flight stops first.
   * @returns {Promise<void>}
   */
  async dispose() {
    if (this.disposed) return;
    this.disposed = true;
    for (const stop of this.running) stop.abort();
    await this.client.request('disposeModel', { handle: this.handle });
  }
}

const WEBGPU_HINT = 'use a WebGPU browser (Chrome/Edge 113+, Safari 26+, Firefox 141+) over https or localhost';

/**
 * What this browser offers webpte, before any download: `{webgpu, adapter: {vendor,
 * architecture, device, description, isFallbackAdapter} | null, limits, features, wgslFeatures,
 * problems, warnings}`. `problems` says why models cannot run here (empty: they can);
 * `warnings` what will be slow or not kept (a software adapter, no Cache API).
 * @param {{gpu?: GPU}} [options]
 * @returns {Promise<Capabilities>}
 */
export async function checkCapabilities({ gpu = globalThis.navigator?.gpu } = {}) {
  const problems = [];
  const warnings = [];
  /** @type {Capabilities} */
  const out = { webgpu: false, adapter: null, limits: {}, features: [], wgslFeatures: [], problems, warnings };
  if (globalThis.isSecureContext === false) problems.push(`this page is not a secure context: ${WEBGPU_HINT}`);
  if (typeof Worker === 'undefined') problems.push('this browser has no Web Workers; webpte runs models in one');
  if (!globalThis.crypto?.subtle) problems.push('crypto.subtle is missing (not a secure context?): downloads cannot be verified');
  if (typeof caches === 'undefined') warnings.push('no Cache API here: model files are downloaded again on every visit');
  if (!gpu) {
    problems.push(`this browser exposes no WebGPU (navigator.gpu is missing); ${WEBGPU_HINT}`);
    return out;
  }
  out.wgslFeatures = [...(gpu.wgslLanguageFeatures ?? [])];
  let adapter = null;
  try {
    adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
    if (!adapter) problems.push('WebGPU gave no adapter; enable hardware acceleration or WebGPU in the browser settings');
  } catch (err) {
    problems.push(`requesting a WebGPU adapter failed (${err.message}); ${WEBGPU_HINT}`);
  }
  if (!adapter) return out;
  out.webgpu = true;
  const info = adapter.info ?? {};
  out.adapter = {
    vendor: info.vendor ?? '', architecture: info.architecture ?? '', device: info.device ?? '',
    description: info.description ?? '', isFallbackAdapter: !!(info.isFallbackAdapter ?? adapter.isFallbackAdapter),
  };
  for (const k in adapter.limits) if (typeof adapter.limits[k] === 'number') out.limits[k] = adapter.limits[k];
  out.features = [...adapter.features];
  if (out.adapter.isFallbackAdapter) warnings.push('the WebGPU adapter is a software fallback: generation will be slow');
  return out;
}
