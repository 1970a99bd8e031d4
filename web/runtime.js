// What the worker's request handlers share: Pyodide (booted once, from the bundled wheels),
// one GPUDevice, and loading a method (plan in Python or a given plan -> Executor).

import { lockFileURL, pyodideFiles, wheelURLs } from './assets.js';
import { tuneDecode } from './autotune.js';
import { checkLimits, requestDevice } from './device.js';
import { Executor } from './executor.js';
import { WebpteError, WorkerError, errorFromWire } from './errors.js';
import { plannerLimits } from './limits.js';
import { fileBytes, parsePlan } from './plan.js';

let python = null; // Promise of {pyodide, glue, boot_ms}
let device = null; // Promise<GPUDevice>, shared by the programs of this worker

/** Whether Python was booted (or is booting). */
export const pythonStarted = () => python !== null;

/** The shared device, if one was made. @returns {Promise<GPUDevice> | null} */
export const currentDevice = () => device;

/**
 * Boot Pyodide once (emits `{stage: 'python'}` the first time) and import webpte.web_glue.
 * @param {(e: object) => void} emit
 * @returns {Promise<{pyodide: any, glue: any, boot_ms: number}>}
 */
export function bootPython(emit) {
  python ??= (async () => {
    const t0 = performance.now();
    emit({ stage: 'python' });
    const files = pyodideFiles();
    let loadPyodide;
    let createPyodideModule;
    let lockFileContents;
    try {
      ({ loadPyodide } = await import(/* webpackIgnore: true */ files.loader));
      ({ default: createPyodideModule } = await import(/* webpackIgnore: true */ files.module));
      lockFileContents = bundledLock(await (await fetch(lockFileURL())).json());
    } catch (err) {
      throw new WorkerError(`the Pyodide core or the bundled wheels could not be loaded (${err.message}); `
        + 'serve every file of the webpte package (dist/ of `npm run build`): with Vite, add '
        + "`optimizeDeps: { exclude: ['webpte'] }` to vite.config; with webpack, set `output: { module: true }` "
        + '(Pyodide needs a module worker); with esbuild, copy node_modules/webpte/dist/ beside the bundle');
    }
    const pyodide = await loadPyodide({
      indexURL: indexURL(files.wasm),
      stdLibURL: files.stdlib,
      createPyodideModule,
      lockFileContents,
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

/**
 * Pyodide's indexURL given where the wasm binary is: Pyodide fetches `${indexURL}pyodide.asm.wasm`
 * (the other core files are passed by URL). A bundler may have renamed the binary
 * (`assets/pyodide.asm-1a2b.wasm`): then the name Pyodide appends goes into the query string.
 * @param {string} wasm
 */
export function indexURL(wasm) {
  const name = 'pyodide.asm.wasm';
  const query = wasm.includes('?');
  if (!query && wasm.endsWith(`/${name}`)) return wasm.slice(0, -name.length);
  return `${wasm}${query ? '&' : '?'}`;
}

/**
 * The bundled lock file with every wheel's `file_name` replaced by the URL the bundler gave it.
 * @param {{packages: Record<string, {file_name: string}>}} lock
 */
export function bundledLock(lock) {
  const urls = wheelURLs();
  const packages = {};
  for (const [name, pkg] of Object.entries(lock.packages)) {
    if (!Object.hasOwn(urls, pkg.file_name)) {
      throw new WorkerError(`the lock file names ${pkg.file_name}, which web/assets.js does not list; rebuild the package`);
    }
    packages[name] = { ...pkg, file_name: urls[pkg.file_name] };
  }
  return { ...lock, packages };
}

/** A Python failure that is not a webpte error: a bug to report, with where it happened. */
export function pythonBug(err, what) {
  const lines = String(err?.message ?? err).trim().split('\n');
  const where = lines.filter((l) => l.trimStart().startsWith('File ')).pop()?.trim() ?? '';
  return new WebpteError(`${what} failed unexpectedly in Python (${lines.pop()} at ${where}); please report it`);
}

/**
 * Call a web_glue function answering `{"ok": value}` / `{"error": {...}}` JSON: the value, or
 * the typed error (same class name as in Python).
 * @param {() => string} call @param {string} what for messages
 */
export function callPy(call, what) {
  let out;
  try {
    out = JSON.parse(call());
  } catch (err) {
    throw pythonBug(err, what);
  }
  if (out.error) throw errorFromWire(out.error);
  return out.ok;
}

const cappedDevices = new Map();

/**
 * The worker's GPUDevice, made once with limits covering `needed` (plan.limits); with
 * `caps` (web/limits.js resolveLimits), one device per caps, made within them.
 * @param {Record<string, number>} needed
 * @param {Record<string, number> | null} [caps]
 */
export async function sharedDevice(needed, caps = null) {
  if (caps != null) {
    const key = JSON.stringify(Object.entries(caps).sort());
    if (!cappedDevices.has(key)) {
      const made = requestDevice({}, { caps });
      cappedDevices.set(key, made);
      made.catch(() => cappedDevices.delete(key));
      made.then((d) => d.lost.then(() => cappedDevices.delete(key)), () => {});
    }
    const d = await cappedDevices.get(key);
    checkLimits(needed, d.limits);
    return d;
  }
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

let adapterFacts = null;

/**
 * What Python plans for, asked of the adapter once: `kind` is "CPU" for a software or
 * fallback adapter (SwiftShader, llvmpipe), else "GPU" (py/webpte/planner/hints.py picks kernel
 * variants for it, as natively from wgpu's adapter type); `subgroups` whether it has WebGPU's
 * `subgroups` (requestDevice then asks for it, and the split-K decode kernels add their
 * partial sums with subgroupAdd); `device` its vendor, architecture and description, which
 * refine the hints for one driver (hints.DRIVER_HINTS: SwiftShader's int8 dot).
 * @returns {Promise<{kind: string, subgroups: boolean, device: string}>}
 */
function adapter() {
  adapterFacts ??= (async () => {
    const a = await navigator.gpu?.requestAdapter({ powerPreference: 'high-performance' });
    const info = a?.info ?? {};
    const device = [info.vendor, info.architecture, info.description].filter(Boolean).join(' ');
    const soft = info.isFallbackAdapter || a?.isFallbackAdapter
      || /swiftshader|llvmpipe|lavapipe|software/i.test(device);
    return { kind: soft ? 'CPU' : 'GPU', subgroups: Boolean(a?.features?.has('subgroups')), device };
  })();
  return adapterFacts;
}

/**
 * What the planner is told about this browser: its WGSL language features (kernel variants,
 * e.g. dot4 int8, depend on them), `adapter_type:CPU|GPU`, `adapter_device:NAME` and
 * `subgroups` where it has them.
 * @returns {Promise<string[]>}
 */
export async function planFeatures() {
  const { kind, subgroups, device } = await adapter();
  return [...(navigator.gpu?.wgslLanguageFeatures ?? []), `adapter_type:${kind}`,
    ...(device ? [`adapter_device:${device}`] : []), ...(subgroups ? ['subgroups'] : [])];
}

async function planInPython(bytes, method, fusion, emit, inputShapes = null, extra = [], caps = null, data = []) {
  const { glue, boot_ms } = await bootPython(emit);
  emit({ stage: 'plan' });
  const t0 = performance.now();
  const ranges = (b, name) => {
    if (isSource(b)) return glue.RangeSource(b.size, (start, stop) => b.readSync(start, stop), name);
    const v = new Uint8Array(b);
    return glue.RangeSource(v.byteLength, (start, stop) => v.subarray(start, stop), name);
  };
  const source = ranges(bytes);
  // Python reads the data files' headers and flatbuffers only, as it does the .pte's.
  const dataSources = data.map(({ name, bytes: b }) => ranges(b, name));
  let result;
  try {
    const args = [source, method, [...await planFeatures(), ...extra], fusion,
      inputShapes == null ? null : JSON.stringify(inputShapes), plannerLimits(caps)];
    result = JSON.parse(glue.plan_program(...args, dataSources));
  } catch (err) {
    throw pythonBug(err, 'the planner');
  } finally {
    source.destroy();
    for (const s of dataSources) s.destroy();
  }
  if (result.error) throw errorFromWire(result.error);
  return { ...result, boot_ms, plan_total_ms: performance.now() - t0 };
}

/**
 * The decode variant measured fastest here for this program (web/autotune.js), or null; with
 * `planned`, the winner's planner answer when it was planned for the measurement.
 */
async function autotuned(bytes, method, fusion, emit, caps, data) {
  const { glue } = await bootPython(emit);
  const { kind, device } = await adapter();
  const spec = callPy(() => glue.autotune_candidates(kind), 'the autotune candidates');
  const answers = new Map();
  const files = programFiles(bytes, data);
  const tuned = await tuneDecode({
    files, method, fusion, device, spec, emit,
    plan: async (hint) => {
      answers.set(hint, await planInPython(bytes, method, fusion, emit, null, hint.split('+'), caps, data));
      return answers.get(hint);
    },
    build: async (parsed) => Executor.create(parsed, files, { device: await sharedDevice(parsed.limits, caps) }),
  });
  return tuned && { tuned, planned: answers.get(tuned.hint) ?? null };
}

/** The .pte's bytes, then each external data file's: what a plan's file inits index. */
const programFiles = (bytes, data) => [bytes, ...data.map((f) => f.bytes)];

/** Whether `x` is a streamed file (web/sources.js), not bytes in memory. */
const isSource = (x) => typeof x?.chunks === 'function';

/**
 * Plan (in Python, unless `plan` is given) and upload one method of a program file.
 * Emits plan, upload, compile (kernels), but not ready.
 * @param {ArrayBuffer | object} bytes the .pte file, in memory or a streamed source
 *   (web/sources.js; then `data` files' `bytes` may be too, and `onBytes(file, n)` counts
 *   their bytes as they stream into the GPU buffers)
 * `inputShapes` (dims per input) plans a method exported with dynamic shapes for those dims.
 * `autotune` plans the decode variant measured fastest on this adapter (web/autotune.js) in
 * place of `plan` (stats.autotune says which, with its times or `cached`).
 * `caps` (web/limits.js resolveLimits) plans within them (weights past a binding are split)
 * and makes the device within them. `data`: the external data files (`.ptd`) the program keeps
 * constants in, `{name, bytes}` each (name: its URL, for messages).
 * @param {{method?: string, plan?: string | object | null, fusion?: string, poison?: boolean,
 *   data?: {name: string, bytes: ArrayBuffer}[],
 *   caps?: Record<string, number> | null,
 *   inputShapes?: number[][] | null, autotune?: boolean, emit: (e: object) => void}} options
 * @returns {Promise<{executor: Executor, positionInput: number[] | null, dynamic: boolean, stats: object}>}
 */
export async function loadExecutor(bytes, { method = 'forward', plan = null, fusion = 'all', poison = false, inputShapes = null, autotune = false, caps = null, data = [], emit, onBytes }) {
  let planned;
  const { tuned = null, planned: tunedPlan = null } = autotune && inputShapes == null
    ? (await autotuned(bytes, method, fusion, emit, caps, data)) ?? {} : {};
  if (tuned) planned = tunedPlan ?? await planInPython(bytes, method, fusion, emit, null, tuned.hint.split('+'), caps, data);
  else if (plan == null) planned = await planInPython(bytes, method, fusion, emit, inputShapes, [], caps, data);
  else if (typeof plan === 'object' && 'plan' in plan) planned = { position_input: null, ...plan };
  else planned = { plan, position_input: null };
  const files = programFiles(bytes, data);
  const parsed = parsePlan(planned.plan, { fileSizes: files.map((f) => f.byteLength ?? f.size) });
  emit({ stage: 'upload' });
  const t1 = performance.now();
  const executor = await Executor.create(parsed, files, {
    device: await sharedDevice(parsed.limits, caps), poison, onStage: (stage) => emit({ stage }), onBytes,
  });
  await executor.device.queue.onSubmittedWorkDone();
  return {
    executor,
    positionInput: planned.position_input ?? null,
    dynamic: planned.dynamic === true,
    stats: {
      file_bytes: bytes.byteLength ?? bytes.size, bytes_read_by_python: planned.bytes_read ?? null,
      data_files: data.map((f) => ({ file: f.name, bytes: f.bytes.byteLength ?? f.bytes.size })),
      constant_bytes: parsed.buffers.reduce((n, b) => n + fileBytes(b.init), 0),
      dispatches: parsed.dispatches.length, kernels: parsed.kernels.length, features: parsed.features,
      device_binding_limit: executor.device.limits.maxStorageBufferBindingSize,
      python_boot_ms: planned.boot_ms ?? null, plan_ms: planned.plan_ms ?? null,
      plan_total_ms: planned.plan_total_ms ?? null, upload_ms: performance.now() - t1,
      ...executor.timings, autotune: tuned,
    },
  };
}
