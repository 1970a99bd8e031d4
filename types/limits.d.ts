/**
 * A `limits` option as caps: null (the adapter's own), 'default' (DEFAULT_LIMITS) or an
 * object of limit names to non-negative numbers.
 * @param {'default' | Record<string, number> | null | undefined} limits
 * @returns {Record<string, number> | null}
 * @throws {InputError}
 */
export function resolveLimits(limits: "default" | Record<string, number> | null | undefined): Record<string, number> | null;
/**
 * The caps the planner plans within (Python's names; only the limits it knows), as JSON, or
 * null without caps.
 * @param {Record<string, number> | null} caps
 * @returns {string | null}
 */
export function plannerLimits(caps: Record<string, number> | null): string | null;
/** WebGPU's default limits, the ones webpte plans against. */
export const DEFAULT_LIMITS: Readonly<{
    maxBufferSize: 268435456;
    maxStorageBufferBindingSize: 134217728;
    maxUniformBufferBindingSize: 65536;
    maxStorageBuffersPerShaderStage: 8;
    maxUniformBuffersPerShaderStage: 12;
    maxComputeWorkgroupSizeX: 256;
    maxComputeWorkgroupSizeY: 256;
    maxComputeWorkgroupSizeZ: 64;
    maxComputeInvocationsPerWorkgroup: 256;
    maxComputeWorkgroupsPerDimension: 65535;
}>;
