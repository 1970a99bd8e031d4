// The GPUDevice a plan runs on: the limits and features a plan needs checked against what
// the adapter (or a caller's cap) offers, the device requested with them, and counters of
// what it makes and submits (tests and stats read them). Mirrors
// py/webpte/native/device.py.

import { AdapterError, AdapterLimitsError, NoWebGPUError, PlanError } from './errors.js';

// Limits a plan may ask for beyond WebGPU's defaults (py/webpte/native/device.py REQUESTABLE).
const REQUESTABLE = ['maxBufferSize', 'maxStorageBufferBindingSize', 'maxStorageBuffersPerShaderStage'];

/**
 * GPU buffers and bind groups made so far on the devices `requestDevice` made (by anyone, not
 * only executors): long-session tests check that decode steps make none after load.
 */
export const gpuCreations = { buffers: 0, bindGroups: 0 };

/**
 * Host round trips so far on those devices: queue submits (by anyone), and bytes executors
 * read back from the GPU. Tests count them per decode step (one submit, only the readout).
 */
export const gpuTraffic = { submits: 0, readBytes: 0 };

/**
 * The latest executor calls (at most RECENT_CALLS, oldest first), each `{n, windows, submits,
 * readBytes, buffers, bindGroups, encode_ms, wait_ms, copy_ms}`: its number since the worker
 * started, how many calls went in its submit, what the devices counted while it ran (queue
 * submits, bytes read back, buffers and bind groups made) and its milliseconds on the host:
 * recording (inputs written, passes encoded, submitted), waiting for the read back (the GPU's
 * work and the map) and copying out. Tests count per decode step; the page bench splits a
 * call's time.
 * @type {Array<Record<string, number>>}
 */
export const recentCalls = [];
const RECENT_CALLS = 256;
let callNumber = 0;

/** Keep `call` among recentCalls, numbered (the oldest goes past RECENT_CALLS). */
export function recordCall(call) {
  if (recentCalls.length === RECENT_CALLS) recentCalls.shift();
  recentCalls.push({ n: ++callNumber, ...call });
}

function countCreations(device) {
  const createBuffer = device.createBuffer.bind(device);
  const createBindGroup = device.createBindGroup.bind(device);
  const { queue } = device;
  const submit = queue.submit.bind(queue);
  device.createBuffer = (desc) => { gpuCreations.buffers++; return createBuffer(desc); };
  device.createBindGroup = (desc) => { gpuCreations.bindGroups++; return createBindGroup(desc); };
  queue.submit = (buffers) => { gpuTraffic.submits++; return submit(buffers); };
  return device;
}

/** snake_case plan limit name -> WebGPU's camelCase. @param {string} name */
export const limitName = (name) => name.replace(/_([a-z])/g, (_, c) => c.toUpperCase());

/**
 * Check `needed` (plan.limits, snake_case) against `have` (GPUSupportedLimits or a plain
 * object); returns the camelCase limits to request. min* limits must be at most the need.
 * @param {Record<string, number>} needed
 * @param {Record<string, number>} have
 * @returns {Record<string, number>}
 * @throws {AdapterLimitsError}
 */
export function checkLimits(needed, have) {
  const out = {};
  for (const [snake, value] of Object.entries(needed ?? {})) {
    const name = limitName(snake);
    const allowed = have[name];
    if (allowed === undefined) continue;
    const isMin = name.startsWith('min');
    if (isMin ? value < allowed : value > allowed) {
      throw new AdapterLimitsError(
        `the plan needs ${name} = ${value}, this GPU allows ${allowed}; use a GPU (or browser) `
        + 'with larger WebGPU limits, or a smaller program', { limit: name, needed: value, allowed });
    }
    out[name] = value;
  }
  return out;
}

/** Device features a plan's `features` may name (the others are WGSL language features). */
const DEVICE_FEATURES = ['subgroups'];

/**
 * Check that the WGSL language features a plan's kernels use are all in `have`
 * (`navigator.gpu.wgslLanguageFeatures`, a set-like; skipped when the browser lists none),
 * and its device features (`subgroups`) in `device.features` once there is a device.
 * @param {string[]} needed
 * @param {{has: (name: string) => boolean} | undefined} have
 * @param {GPUDevice | null} [device]
 * @throws {PlanError}
 */
export function checkFeatures(needed, have, device = null) {
  const deviceFeatures = (needed ?? []).filter((f) => DEVICE_FEATURES.includes(f));
  const lacking = device ? deviceFeatures.filter((f) => !device.features.has(f)) : [];
  if (lacking.length) {
    throw new PlanError(`the plan's kernels use ${lacking.join(', ')}, which this GPU device lacks; `
      + 'plan the program in this page (without a cached plan from another device)');
  }
  if (!have) return;
  const missing = (needed ?? []).filter((f) => !have.has(f) && !DEVICE_FEATURES.includes(f));
  if (missing.length) {
    throw new PlanError(`the plan's kernels use WGSL features this browser lacks (${missing.join(', ')}); `
      + 'plan the program in this page (without a cached plan from another device)');
  }
}

/**
 * A WebGPU device whose limits cover `needed` (plan.limits). It asks the adapter for its
 * maxima of the requestable limits, like the native device, so one device serves several
 * plans.
 * @param {Record<string, number>} [needed]
 * @param {{gpu?: GPU, powerPreference?: GPUPowerPreference}} [options]
 * @returns {Promise<GPUDevice>}
 * @throws {NoWebGPUError | AdapterLimitsError | AdapterError}
 */
export async function requestDevice(needed = {}, { gpu = globalThis.navigator?.gpu, powerPreference = 'high-performance', caps = null } = {}) {
  if (!gpu) {
    throw new NoWebGPUError('this browser exposes no WebGPU (navigator.gpu is missing); use a '
      + 'WebGPU browser (Chrome/Edge 113+, Safari 26+, Firefox 141+) over https or localhost');
  }
  const adapter = await gpu.requestAdapter({ powerPreference });
  if (!adapter) {
    throw new NoWebGPUError('WebGPU gave no adapter; enable hardware acceleration or WebGPU in '
      + 'the browser settings (or chrome://flags/#enable-unsafe-webgpu)');
  }
  // With caps (web/limits.js), the device gets no more than they allow: what a smaller
  // adapter would give.
  const offered = (n) => Math.min(adapter.limits[n], caps?.[n] ?? Infinity);
  checkLimits(needed, caps ? Object.fromEntries(Object.keys(needed ?? {}).map(limitName)
    .filter((n) => adapter.limits[n] !== undefined).map((n) => [n, offered(n)])) : adapter.limits);
  const requiredLimits = Object.fromEntries(REQUESTABLE.map((n) => [n, offered(n)]));
  try {
    // Subgroups whenever the adapter has them: plans for this browser may use them.
    const requiredFeatures = DEVICE_FEATURES.filter((f) => adapter.features.has(f));
    return countCreations(await adapter.requestDevice({ requiredLimits, requiredFeatures, label: 'webpte' }));
  } catch (err) {
    throw new AdapterError(`the adapter refused a device (${err.message}); close other GPU-heavy tabs and retry`);
  }
}
