// What the page says about checkCapabilities()'s answer: a status line and facts to list.

import { formatBytes } from './format.js';

const LIMITS = [
  ['maxBufferSize', 'max buffer', true],
  ['maxStorageBufferBindingSize', 'max storage binding', true],
  ['maxComputeWorkgroupStorageSize', 'workgroup memory', true],
  ['maxComputeInvocationsPerWorkgroup', 'invocations per workgroup', false],
  ['maxStorageBuffersPerShaderStage', 'storage buffers per stage', false],
];

// Features that make webpte's kernels faster when present (none is required).
const HELPFUL = [
  ['packed_4x8_integer_dot_product', 'int8 dot products'],
  ['shader-f16', 'f16'],
  ['subgroups', 'subgroups'],
];

function adapterName(adapter) {
  const name = adapter?.description
    || [adapter?.vendor, adapter?.architecture, adapter?.device].filter(Boolean).join(' ');
  return (name || 'unnamed adapter') + (adapter?.isFallbackAdapter ? ' (software fallback)' : '');
}

/**
 * `{ok, status, tone, facts, all, warnings}` for a checkCapabilities() answer: `ok` false when
 * models cannot run here (no WebGPU, or `problems`); `facts` and `all` are [term, value] pairs.
 * @param {{webgpu: boolean, adapter?: object, limits?: object, features?: Iterable<string>,
 *   wgslFeatures?: Iterable<string>, problems?: string[], warnings?: string[]}} caps
 */
export function describeCapabilityCheck(caps) {
  const problems = caps.problems ?? [];
  const warnings = caps.warnings ?? [];
  if (!caps.webgpu || problems.length) {
    return {
      ok: false, tone: 'bad', facts: [], all: [], warnings: [],
      status: caps.webgpu ? '✗ Models cannot run in this page.' : '✗ No WebGPU: models cannot run here.',
    };
  }
  const limits = caps.limits ?? {};
  const features = [...(caps.features ?? [])];
  const wgsl = [...(caps.wgslFeatures ?? [])];
  const has = new Set([...features, ...wgsl]);
  return {
    ok: true,
    tone: warnings.length ? 'warn' : 'good',
    status: warnings.length ? '⚠ WebGPU is available, with limitations:' : '✓ WebGPU is available.',
    facts: [
      ['Adapter', adapterName(caps.adapter)],
      ['Limits', LIMITS.filter(([key]) => limits[key] != null)
        .map(([key, label, bytes]) => `${label} ${bytes ? formatBytes(limits[key]) : limits[key]}`)
        .join(' · ') || 'unknown'],
      ['Helpful', HELPFUL.map(([name, what]) => `${has.has(name) ? '✓' : '✗'} ${what}`).join(' · ')],
    ],
    all: [['Features', features.join(', ') || 'none'], ['WGSL', wgsl.join(', ') || 'none']],
    warnings,
  };
}
