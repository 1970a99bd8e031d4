/** Keep `call` among recentCalls, numbered (the oldest goes past RECENT_CALLS). */
export function recordCall(call: any): void;
/**
 * Check `needed` (plan.limits, snake_case) against `have` (GPUSupportedLimits or a plain
 * object); returns the camelCase limits to request. min* limits must be at most the need.
 * @param {Record<string, number>} needed
 * @param {Record<string, number>} have
 * @returns {Record<string, number>}
 * @throws {AdapterLimitsError}
 */
export function checkLimits(needed: Record<string, number>, have: Record<string, number>): Record<string, number>;
/**
 * Check that the WGSL language features a plan's kernels use are all in `have`
 * (`navigator.gpu.wgslLanguageFeatures`, a set-like; skipped when the browser lists none),
 * and its device features (`subgroups`) in `device.features` once there is a device.
 * @param {string[]} needed
 * @param {{has: (name: string) => boolean} | undefined} have
 * @param {GPUDevice | null} [device]
 * @throws {PlanError}
 */
export function checkFeatures(needed: string[], have: {
    has: (name: string) => boolean;
} | undefined, device?: GPUDevice | null): void;
/**
 * A WebGPU device whose limits cover `needed` (plan.limits). It asks the adapter for its
 * maxima of the requestable limits, like the native device, so one device serves several
 * plans.
 * @param {Record<string, number>} [needed]
 * @param {{gpu?: GPU, powerPreference?: GPUPowerPreference}} [options]
 * @returns {Promise<GPUDevice>}
 * @throws {NoWebGPUError | AdapterLimitsError | AdapterError}
 */
export function requestDevice(needed?: Record<string, number>, { gpu, powerPreference, caps }?: {
    gpu?: GPU;
    powerPreference?: GPUPowerPreference;
}): Promise<GPUDevice>;
export namespace gpuCreations {
    let buffers: number;
    let bindGroups: number;
}
export namespace gpuTraffic {
    let submits: number;
    let readBytes: number;
}
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
export const recentCalls: Array<Record<string, number>>;
export function limitName(name: string): string;
