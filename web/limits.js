// WebGPU limits a program is planned for and its device created within (the page's side of
// py/webpte/limits.py): `limits: 'default'` is the specification's defaults; an object caps
// some limits (camelCase WebGPU names; `deviceMemory` a byte budget preflight checks).
import { InputError } from './errors.js';

/** WebGPU's default limits, the ones webpte plans against. */
export const DEFAULT_LIMITS = Object.freeze({
  maxBufferSize: 268435456,
  maxStorageBufferBindingSize: 134217728,
  maxUniformBufferBindingSize: 65536,
  maxStorageBuffersPerShaderStage: 8,
  maxUniformBuffersPerShaderStage: 12,
  maxComputeWorkgroupSizeX: 256,
  maxComputeWorkgroupSizeY: 256,
  maxComputeWorkgroupSizeZ: 64,
  maxComputeInvocationsPerWorkgroup: 256,
  maxComputeWorkgroupsPerDimension: 65535,
});

/**
 * A `limits` option as caps: null (the adapter's own), 'default' (DEFAULT_LIMITS) or an
 * object of limit names to non-negative numbers.
 * @param {'default' | Record<string, number> | null | undefined} limits
 * @returns {Record<string, number> | null}
 * @throws {InputError}
 */
export function resolveLimits(limits) {
  if (limits == null) return null;
  if (limits === 'default') return { ...DEFAULT_LIMITS };
  if (typeof limits !== 'object' || Array.isArray(limits)
      || !Object.values(limits).every((v) => typeof v === 'number' && Number.isFinite(v) && v >= 0)) {
    throw new InputError("limits must be 'default' or an object of WebGPU limit names (and deviceMemory) to non-negative numbers");
  }
  return { ...limits };
}

const snake = (name) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/**
 * The caps the planner plans within (Python's names; only the limits it knows), as JSON, or
 * null without caps.
 * @param {Record<string, number> | null} caps
 * @returns {string | null}
 */
export function plannerLimits(caps) {
  if (caps == null) return null;
  const out = {};
  for (const [name, value] of Object.entries(caps)) {
    if (Object.hasOwn(DEFAULT_LIMITS, name)) out[snake(name)] = Math.floor(value);
  }
  return JSON.stringify(out);
}
