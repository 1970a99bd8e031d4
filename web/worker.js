// The webpte worker: hosts Pyodide (reader + planner, from the bundled wheels) and the JS
// executor. Serves the requests of protocol.js: load, run, reset, dispose, info.
// The program file stays in this worker's JS memory; Python reads only the byte ranges it
// asks for (the flatbuffer regions) and constants go from the file bytes to the GPU.

import { Executor, checkLimits, requestDevice } from './executor.js';
import { InputError, WebpteError, WorkerError, errorFromWire } from './errors.js';
import { Transfer, serve } from './protocol.js';
import { parsePlan } from './plan.js';

const BASE = new URL('./', import.meta.url);
/** @type {Map<number, {executor: Executor, positionInput: number[] | null}>} */
const programs = new Map();
let nextHandle = 1;
let python = null; // Promise of {pyodide, glue, boot_ms}
let device = null; // Promise<GPUDevice>, shared by the programs of this worker

function bootPython(emit) {
  python ??= (async () => {
    const t0 = performance.now();
    emit({ stage: 'python' });
    let loadPyodide;
    try {
      ({ loadPyodide } = await import(new URL('pyodide/pyodide.mjs', BASE).href));
    } catch (err) {
      throw new WorkerError(`the Pyodide core is missing next to worker.js (${err.message}); serve the whole dist/ built by \`npm run build\``);
    }
    const pyodide = await loadPyodide({
      indexURL: new URL('pyodide/', BASE).href,
      lockFileURL: new URL('wheels/pyodide-lock.json', BASE).href,
      packages: ['webpte'],
      stdout: (s) => console.log(`[python] ${s}`),
      stderr: (s) => console.warn(`[python] ${s}`),
    });
    const glue = pyodide.pyimport('webpte.web_glue');
    return { pyodide, glue, boot_ms: performance.now() - t0 };
  })();
  python.catch(() => { python = null; });
  return python;
}

async function sharedDevice(needed) {
  if (device) {
    const d = await device;
    checkLimits(needed, d.limits);
    return d;
  }
  device = requestDevice(needed);
  device.catch(() => { device = null; });
  const d = await device;
  d.lost.then(() => { device = null; });
  return d;
}

async function fetchBytes(source, emit) {
  if (source instanceof ArrayBuffer) return source;
  if (ArrayBuffer.isView(source)) return source.buffer.slice(source.byteOffset, source.byteOffset + source.byteLength);
  if (typeof Blob !== 'undefined' && source instanceof Blob) return source.arrayBuffer();
  if (typeof source !== 'string') throw new InputError('a program source is a URL string, an ArrayBuffer, a TypedArray or a File/Blob');
  let resp;
  try {
    resp = await fetch(source);
  } catch (err) {
    throw new InputError(`fetching ${source} failed (${err.message}); check the URL and the connection`);
  }
  if (!resp.ok) throw new InputError(`fetching ${source} gave HTTP ${resp.status}; check the URL`);
  // Content-Length counts encoded bytes; only an unencoded body can be preallocated.
  const encoded = (resp.headers.get('content-encoding') ?? 'identity') !== 'identity';
  const total = encoded ? 0 : Number(resp.headers.get('content-length')) || 0;
  if (!resp.body) return resp.arrayBuffer();
  const chunks = [];
  let out = total ? new Uint8Array(total) : null;
  let loaded = 0;
  for await (const chunk of resp.body) {
    if (out && loaded + chunk.length > total) throw new InputError(`${source} is longer than its Content-Length`);
    if (out) out.set(chunk, loaded);
    else chunks.push(chunk);
    loaded += chunk.length;
    emit({ stage: 'fetch', loaded, total });
  }
  if (!out) {
    out = new Uint8Array(loaded);
    let at = 0;
    for (const c of chunks) { out.set(c, at); at += c.length; }
  } else if (loaded !== total) {
    throw new InputError(`${source} ended after ${loaded} of ${total} bytes; the download was cut, retry`);
  }
  return out.buffer;
}

/** WGSL language features of this browser: kernel variants (e.g. dot4 int8) depend on them. */
function wgslFeatures() {
  return [...(navigator.gpu?.wgslLanguageFeatures ?? [])];
}

async function planInPython(bytes, method, emit) {
  const { glue, boot_ms } = await bootPython(emit);
  emit({ stage: 'plan' });
  const t0 = performance.now();
  const view = new Uint8Array(bytes);
  const source = glue.RangeSource(view.byteLength, (start, stop) => view.subarray(start, stop));
  let result;
  try {
    result = JSON.parse(glue.plan_program(source, method, wgslFeatures()));
  } catch (err) {
    const lines = err.message.trim().split('\n');
    const where = lines.filter((l) => l.trimStart().startsWith('File ')).pop()?.trim() ?? '';
    throw new WebpteError(`the planner failed unexpectedly (${lines.pop()} at ${where}); please report it with the .pte`);
  } finally {
    source.destroy();
  }
  if (result.error) throw errorFromWire(result.error);
  return { ...result, boot_ms, plan_total_ms: performance.now() - t0 };
}

const handlers = {
  /** {source, method?, plan?, poison?} -> {handle, method, inputs, outputs, stats} */
  async load({ source, method = 'forward', plan = null, poison = false }, emit) {
    const t0 = performance.now();
    const bytes = await fetchBytes(source, emit);
    const fetch_ms = performance.now() - t0;
    let planned;
    if (plan == null) planned = await planInPython(bytes, method, emit);
    else if (typeof plan === 'object' && 'plan' in plan) planned = { position_input: null, ...plan };
    else planned = { plan, position_input: null };
    const parsed = parsePlan(planned.plan, { fileSize: bytes.byteLength });
    emit({ stage: 'upload' });
    const t1 = performance.now();
    const executor = await Executor.create(parsed, bytes, { device: await sharedDevice(parsed.limits), poison });
    await executor.device.queue.onSubmittedWorkDone();
    const handle = nextHandle++;
    programs.set(handle, { executor, positionInput: planned.position_input ?? null });
    emit({ stage: 'ready' });
    return {
      handle, method: parsed.method, inputs: parsed.inputs, outputs: parsed.outputs,
      max_context: parsed.max_context ?? null,
      stats: {
        file_bytes: bytes.byteLength, bytes_read_by_python: planned.bytes_read ?? null,
        constant_bytes: parsed.buffers.reduce((n, b) => n + (b.init?.kind === 'file' ? b.init.nbytes : 0), 0),
        dispatches: parsed.dispatches.length, kernels: parsed.kernels.length, features: parsed.features,
        fetch_ms, python_boot_ms: planned.boot_ms ?? null, plan_ms: planned.plan_ms ?? null,
        plan_total_ms: planned.plan_total_ms ?? null, upload_ms: performance.now() - t1,
        ...executor.timings,
      },
    };
  },

  /** {handle, inputs} -> outputs (TypedArrays, transferred) */
  async run({ handle, inputs }) {
    const p = program(handle);
    checkContext(p, inputs);
    const outs = await p.executor.run(inputs);
    return new Transfer(outs, outs.map((o) => o.buffer));
  },

  async reset({ handle }) {
    await program(handle).executor.reset();
  },

  async dispose({ handle }) {
    programs.get(handle)?.executor.dispose();
    programs.delete(handle);
  },

  /** -> {programs, python: bool, adapter: {vendor, architecture, ...} | null} */
  async info() {
    const d = device ? await device : null;
    return { programs: programs.size, python: python !== null, adapter: d?.adapterInfo ? { ...plain(d.adapterInfo) } : null };
  },
};

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
