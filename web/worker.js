// The webpte worker: hosts Pyodide (reader + planner + host contract, from the bundled wheels)
// and the JS executor. Serves the requests of protocol.js: programs (load, run, reset,
// dispose), models (loadModel, generate, resetModel, disposeModel; model_worker.js) and info.
// Files stay in this worker's JS memory; Python reads only the byte ranges it asks for (the
// flatbuffer regions) and constants go from the file bytes to the GPU.

import { InputError, errorFromWire } from './errors.js';
import { modelHandlers } from './model_worker.js';
import { Transfer, serve } from './protocol.js';
import { gpuCreations, gpuTraffic, recentCalls } from './device.js';
import { resolveLimits } from './limits.js';
import { preflightProgram, streamPlanned, takePlan } from './preflight.js';
import { BlobFile, UrlFile, blobOf } from './sources.js';
import { bootPython, currentDevice, loadExecutor, pythonStarted } from './runtime.js';

/** @type {Map<number, {executor: import('./executor.js').Executor, positionInput: number[] | null}>} */
const programs = new Map();
let nextHandle = 1;

/**
 * A program file as the loader reads it: an ArrayBuffer the caller gave (held whole), or a
 * BlobFile (a File/Blob; a URL whose server serves no byte ranges is first streamed into a
 * Blob, which the browser keeps outside this heap): web/sources.js.
 */
async function fileOf(source, emit, chunkBytes) {
  if (source instanceof ArrayBuffer) return source;
  if (ArrayBuffer.isView(source)) return source.buffer.slice(source.byteOffset, source.byteOffset + source.byteLength);
  if (typeof Blob !== 'undefined' && source instanceof Blob) return new BlobFile(source, source.name || 'the program Blob', { chunkBytes });
  if (typeof source !== 'string') throw new InputError('a program source is a URL string, an ArrayBuffer, a TypedArray or a File/Blob');
  let loaded = 0;
  const url = new UrlFile(source);
  const blob = await blobOf(url.chunks((n) => {
    loaded += n;
    emit({ stage: 'fetch', loaded, total: url.size ?? 0 });
  }));
  return new BlobFile(blob, source, { chunkBytes });
}

/** The external data files of a program: `{name, bytes}` each (name: the URL). */
async function fetchData(data, emit, chunkBytes) {
  const out = [];
  for (const [k, source] of data.entries()) {
    const name = typeof source === 'string' ? source : `data file ${k + 1}`;
    out.push({ name, bytes: await fileOf(source, (e) => emit({ ...e, file: name }), chunkBytes) });
  }
  return out;
}

/** Progress of streamed files: `onBytes(file, n)` -> fetch events in bytes of them all. */
function streamProgress(files, emit) {
  const total = files.reduce((n, f) => n + (f.byteLength ?? f.size), 0);
  let loaded = 0;
  let last = -Infinity;
  return (k, n) => {
    loaded += n;
    const t = performance.now();
    if (t - last < 100 && loaded < total) return;
    last = t;
    emit({ stage: 'fetch', file: files[k].name, loaded, total });
  };
}

const models = modelHandlers();

const handlers = {
  /** {source, data?, method?, plan?, fusion?, poison?, preflight?, limits?, autotune?, chunkBytes?} -> {handle, method, inputs, outputs, stats} */
  async load({ source, data = [], method = 'forward', plan = null, fusion = 'all', poison = false, preflight = true, limits = null, autotune = false, chunkBytes = undefined }, emit) {
    const t0 = performance.now();
    const caps = resolveLimits(limits);
    if (!Array.isArray(data)) throw new InputError('data is a list of external data files (.ptd): URLs, ArrayBuffers, TypedArrays or Blobs');
    // A URL's program is planned from its flatbuffer ranges (and its data files') and checked
    // before it is fetched.
    const preflighted = typeof source === 'string' && plan == null && preflight && data.every((d) => typeof d === 'string')
      ? await preflightProgram(source, { glue: (await bootPython(emit)).glue, method, fusion, limits: caps, data })
      : null;
    // Planned by the preflight: the files stream into the GPU buffers, checked against the
    // ranges the plan was read from as they pass.
    const streamed = streamPlanned(preflighted, source, data, { chunkBytes });
    let bytes;
    let dataFiles;
    let reused;
    if (streamed) {
      [bytes, ...dataFiles] = streamed.files;
      dataFiles = dataFiles.map((f) => ({ name: f.name, bytes: f }));
      reused = streamed.planned;
    } else {
      bytes = await fileOf(source, emit, chunkBytes);
      dataFiles = await fetchData(data, emit, chunkBytes);
      reused = bytes instanceof ArrayBuffer && takePlan(preflighted, bytes, dataFiles.map((f) => f.bytes));
    }
    const fetch_ms = performance.now() - t0;
    if (reused) emit({ stage: 'plan' });   // planned by the preflight, from the same file's ranges
    const planned = reused && { ...reused, boot_ms: (await bootPython(emit)).boot_ms };
    const onBytes = streamProgress([bytes, ...dataFiles.map((f) => f.bytes)], emit);
    const { executor, positionInput, dynamic, stats } = await loadExecutor(bytes, {
      method, plan: planned || plan, fusion, poison, emit, autotune: autotune === true && plan == null, caps, data: dataFiles, onBytes,
    });
    const handle = nextHandle++;
    // A method with dynamic shapes keeps its bytes: calls with other dims are planned for them.
    programs.set(handle, { executor, positionInput, dynamic, bytes: dynamic ? bytes : null, data: dynamic ? dataFiles : [], method, fusion, poison, caps, specialized: new Map() });
    emit({ stage: 'ready' });
    const { plan: parsed } = executor;
    return {
      handle, method: parsed.method, inputs: parsed.inputs, outputs: parsed.outputs,
      max_context: parsed.max_context ?? null, stats: { fetch_ms, ...stats, preflight: preflighted },
    };
  },

  /** {handle, inputs} -> outputs (TypedArrays, transferred) */
  async run({ handle, inputs }) {
    const p = program(handle);
    checkContext(p, inputs);
    const executor = await executorFor(p, inputs);
    const outs = await executor.run(inputs);
    return new Transfer(outs, outs.map((o) => o.buffer));
  },

  async reset({ handle }) {
    await program(handle).executor.reset();
  },

  async dispose({ handle }) {
    const p = programs.get(handle);
    p?.executor.dispose();
    for (const ex of p?.specialized.values() ?? []) ex.dispose();
    programs.delete(handle);
  },

  /**
   * -> {programs, models, python: bool, adapter: {vendor, architecture, ...} | null, created:
   * {buffers, bindGroups} (GPU objects made so far), traffic: {submits, readBytes} (queue
   * submits and bytes read back so far), calls: the latest executor calls, each with what the
   * devices counted while it ran and its host timings (executor.js recentCalls), memory:
   * {wasmHeapBytes} (Pyodide's; null before Python boots)}. `{gc: true}` collects garbage first where the
   * browser allows it (--js-flags=--expose-gc).
   */
  async info(content) {
    const d = currentDevice() ? await currentDevice() : null;
    if (content?.gc) globalThis.gc?.();
    return {
      programs: programs.size, models: models.count(), python: pythonStarted(),
      adapter: d?.adapterInfo ? { ...plain(d.adapterInfo) } : null,
      created: { ...gpuCreations }, traffic: { ...gpuTraffic }, calls: [...recentCalls],
      memory: await memory(),
    };
  },

  /**
   * Tests of device-loss recovery: destroy the worker's GPUDevice now, as a driver reset
   * would (served at once, even while a generation runs). -> whether there was one.
   */
  async loseDevice() {
    const d = currentDevice() ? await currentDevice() : null;
    d?.destroy();
    return d != null;
  },

  ...models.handlers,
};

// Pyodide's linear memory, which only grows (Chromium has no performance.memory in workers:
// tests read the worker's JS heap over the DevTools protocol).
async function memory() {
  const wasm = pythonStarted() ? (await bootPython(() => {})).pyodide._module?.HEAPU8?.byteLength : null;
  return { wasmHeapBytes: wasm ?? null };
}

function plain(info) {
  const out = {};
  for (const k of ['vendor', 'architecture', 'device', 'description']) out[k] = info[k];
  return out;
}

function program(handle) {
  const p = programs.get(handle);
  if (!p) throw errorFromWire({ name: 'DisposedError', message: `program ${handle} was disposed; load it again` });
  return p;
}

// The executor for these inputs' dims (py/webpte/program.py Program._executor_for): the loaded
// plan's, or, for a method exported with dynamic shapes, one planned for the call's dims
// (once per distinct dims; Python checks them against the exported bounds).
async function executorFor(p, inputs) {
  if (!p.dynamic || !Array.isArray(inputs)) return p.executor;
  const shapes = p.executor.plan.inputs.map((spec, i) => {
    const x = inputs[i];
    return Array.isArray(x?.shape) ? x.shape.map(Number) : spec.shape;
  });
  if (shapes.every((s, i) => s.length === p.executor.plan.inputs[i].shape.length
    && s.every((d, j) => d === p.executor.plan.inputs[i].shape[j]))) return p.executor;
  if (p.executor.plan.state?.length) {
    throw new InputError('calls with other input dims are not supported for programs with persistent state (KV caches)');
  }
  const key = JSON.stringify(shapes);
  if (!p.specialized.has(key)) {
    const { executor } = await loadExecutor(p.bytes, { method: p.method, fusion: p.fusion, poison: p.poison, inputShapes: shapes, caps: p.caps, data: p.data, emit: () => {} });
    p.specialized.set(key, executor);
  }
  return p.specialized.get(key);
}

// The decoder's context rule (py/webpte/program.py Program._check_context): the planner says
// which input is input_pos and how many rows a call writes.
function checkContext({ executor, positionInput }, inputs) {
  const max = executor.plan.max_context;
  if (!positionInput || max == null || !Array.isArray(inputs)) return;
  const [index, rows] = positionInput;
  const value = inputs[index];
  const data = ArrayBuffer.isView(value) ? value : value?.data;
  if (!ArrayBuffer.isView(data) || data.length !== 1) {
    throw new InputError(`input ${index} (input_pos) must hold one position`);
  }
  const pos = Number(data[0]);
  if (pos < 0 || pos + rows > max) {
    throw new InputError(`input_pos ${pos} + ${rows} rows exceeds the context of ${max} positions; `
      + 'start a new conversation (reset) or shorten the prompt');
  }
}

serve(self, handlers);
