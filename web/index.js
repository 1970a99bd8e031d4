// webpte in the page: load an ExecuTorch WebGPU `.pte` and run it on navigator.gpu.
//
//   import { loadProgram } from './webpte/index.js';
//   const program = await loadProgram('model.pte');          // URL, ArrayBuffer or File
//   const [logits] = await program.run([embeds, inputPos]);  // TypedArrays in method order
//   await program.reset();                                    // zero KV caches
//   await program.dispose();
//
//   import { loadModel } from './webpte/index.js';            // a model folder: decoder (+ vision),
//   const model = await loadModel('models/smollm2/');         // embeddings, tokenizer (see model.js)
//   for await (const ev of model.generate({ prompt: 'Hi' })) if (ev.type === 'text') show(ev.text);
//
// Reading and planning run in Python (Pyodide) inside a Web Worker; the worker's JS executor
// runs the plan. Every file comes from next to this module (dist/ of `npm run build`).

import { resolveURL, runtime } from './client.js';
import { DisposedError, InputError } from './errors.js';

export {
  WebpteError, PteFormatError, UnsupportedOpError, PlanError, InputError, AdapterError,
  NoWebGPUError, AdapterLimitsError, DeviceLostError, DisposedError, WorkerError,
  ContextFullError, TemplateError, ModelFolderError, HashMismatchError, QuotaError,
  ExternalDataError,
} from './errors.js';
export { Executor } from './executor.js';
export { requestDevice } from './device.js';
export { parsePlan } from './plan.js';
export { runtimeInfo, terminate } from './client.js';
export { loadModel, Model, checkCapabilities } from './model.js';
export { CACHE_NAME } from './files.js';
export { listCachedModels, hasModelInCache, deleteModelFromCache } from './cache.js';

/**
 * Load one method of a `.pte` program: fetch it, plan it in Python, upload it to the GPU.
 * @param {string | URL | ArrayBuffer | ArrayBufferView | Blob} source a URL (fetched by the
 *   worker), the file's bytes (copied to the worker), or a File/Blob
 * @param {object} [options]
 * @param {string} [options.method] method name (default "forward")
 * @param {string | object} [options.plan] a plan made earlier (`Plan.to_json()`, e.g. cached by
 *   the file's sha256): skips Python entirely
 * @param {(event: {stage: string, loaded?: number, total?: number}) => void} [options.onProgress]
 *   stages: fetch, python, plan, autotune (with `autotune`, when it measures), upload, compile, ready
 * @param {boolean} [options.transfer] move an ArrayBuffer source to the worker instead of
 *   copying it (it is detached here afterwards; saves a copy of a large file)
 * @param {'all' | 'elementwise' | 'none'} [options.fusion] how much the planner fuses:
 *   everything (default), elementwise chains only, or nothing (one dispatch per op)
 * @param {boolean} [options.poison] fill activations/outputs with NaNs first (tests)
 * @param {boolean} [options.preflight] for a URL: plan from the file's flatbuffer ranges (HTTP
 *   Range requests) and check the device's limits before the file is downloaded (default true)
 * @param {'default' | Record<string, number> | null} [options.limits] 'default': plan for and
 *   create the device with WebGPU's default limits (weights past a 128 MiB binding are split);
 *   an object caps some WebGPU limits (camelCase names) the same way, and `deviceMemory` (a byte
 *   budget) is checked by the preflight (see loadModel)
 * @param {boolean} [options.autotune] time the decode kernel variants of a program with few-row
 *   int8 linears on this adapter (a few calls each, once: the choice is cached per adapter and
 *   program) and plan the fastest; `stats.autotune` tells which (null: nothing to tune)
 * @param {Array<string | URL | ArrayBuffer | ArrayBufferView | Blob>} [options.data] the external
 *   data files (`.ptd`) the program keeps constants in (ExecuTorch external constants), as URLs
 *   or bytes; a constant none of them holds is an ExternalDataError naming its key (a program
 *   with data files is not preflighted)
 * @param {number} [options.chunkBytes] bytes a streamed file is read in (HTTP Range requests of
 *   a preflighted URL, slices of a File/Blob; default 8 MiB): what the loader holds of the
 *   weights at once is about two chunks plus the largest tensor it converts. A URL is streamed
 *   into the GPU buffers; only an ArrayBuffer or TypedArray source is held whole
 * @returns {Promise<Program>}
 * @throws {PteFormatError | UnsupportedOpError | PlanError | AdapterError | AdapterLimitsError | InputError | ExternalDataError | WorkerError}
 */
export async function loadProgram(source, { method = 'forward', plan = null, fusion = 'all', onProgress, transfer = false, poison = false, preflight = true, limits = null, autotune = false, data = [], chunkBytes = undefined } = {}) {
  if (source instanceof URL) source = source.href;
  data = dataSources(data);
  const isBytes = source instanceof ArrayBuffer || ArrayBuffer.isView(source)
    || (typeof Blob !== 'undefined' && source instanceof Blob);
  if (typeof source !== 'string' && !isBytes) {
    throw new InputError('loadProgram takes a URL string, an ArrayBuffer, a TypedArray or a File/Blob');
  }
  const client = runtime();
  if (typeof source === 'string') source = resolveURL(source);
  const moved = transfer && source instanceof ArrayBuffer ? [source] : [];
  if (chunkBytes !== undefined && !(Number.isSafeInteger(chunkBytes) && chunkBytes > 0)) throw new InputError('chunkBytes is a positive number of bytes');
  const info = await client.request('load', { source, data, method, plan, fusion, poison, preflight: !!preflight, limits, autotune: !!autotune, chunkBytes }, { onEvent: onProgress, transfer: moved });
  return new Program(client, info);
}

/** loadProgram's `data` as the worker takes it: absolute URLs and bytes. */
function dataSources(data) {
  if (!Array.isArray(data)) throw new InputError('loadProgram\'s data is a list of .ptd files (URLs or bytes)');
  return data.map((d) => {
    if (d instanceof URL) return d.href;
    if (typeof d === 'string') return resolveURL(d);
    if (d instanceof ArrayBuffer || ArrayBuffer.isView(d) || (typeof Blob !== 'undefined' && d instanceof Blob)) return d;
    throw new InputError('a data file is a URL string, an ArrayBuffer, a TypedArray or a File/Blob');
  });
}

/** @typedef {{dtype: string, shape: number[], storage: string, name: string}} TensorSpec */

/** A loaded method. Make it with `loadProgram`. */
export class Program {
  /** @private */
  constructor(client, info) {
    /** @private */
    this.client = client;
    /** @private @type {number} */
    this.handle = info.handle;
    /** Method name. @type {string} */
    this.method = info.method;
    /** What run() takes. @type {TensorSpec[]} */
    this.inputs = info.inputs;
    /** What run() gives. @type {TensorSpec[]} */
    this.outputs = info.outputs;
    /** Positions of a windowed decoder's context, or null. @type {number | null} */
    this.maxContext = info.max_context;
    /** Load statistics: file_bytes, bytes_read_by_python, dispatches, *_ms timings. @type {Record<string, any>} */
    this.stats = info.stats;
    this.disposed = false;
  }

  /**
   * Run one call. Inputs are checked (count, element count or `{data, shape}` shape, dtype,
   * int64 range, context) before the GPU; state persists across calls until `reset()`.
   * @param {Array<ArrayBufferView | {data: ArrayBufferView, shape: number[]}>} inputs
   * @returns {Promise<ArrayBufferView[]>} one TypedArray per output (int64 -> BigInt64Array)
   * @throws {InputError | DeviceLostError | DisposedError}
   */
  run(inputs) {
    return this.#request('run', { handle: this.handle, inputs });
  }

  /** Zero persistent state (KV caches). @returns {Promise<void>} */
  reset() {
    return this.#request('reset', { handle: this.handle });
  }

  /** Free this program's GPU memory. @returns {Promise<void>} */
  async dispose() {
    if (this.disposed) return;
    this.disposed = true;
    await this.client.request('dispose', { handle: this.handle });
  }

  #request(kind, content) {
    if (this.disposed) return Promise.reject(new DisposedError('this program was disposed; load it again'));
    return this.client.request(kind, content);
  }
}
