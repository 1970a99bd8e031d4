// A pipeline that cannot be made because the GPU side is gone (a lost device, or Chromium's
// "A valid external Instance reference no longer exists") is a DeviceLostError, not a
// PlanError; a pipeline the device refuses for the kernel's own sake stays a PlanError.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Executor } from '../../web/executor.js';
import { DeviceLostError, PlanError } from '../../web/errors.js';

globalThis.GPUBufferUsage ??= { STORAGE: 128, COPY_DST: 8, COPY_SRC: 4, MAP_READ: 1 };

const WGSL = `@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64) fn main() {}`;

function plan() {
  return {
    method: 'forward', version: 1, max_context: null, readouts: [], features: [], state: [], limits: {},
    buffers: [{ id: 0, size: 16, role: 'input', label: 'x', init: null, values: [] },
      { id: 1, size: 16, role: 'output', label: 'y', init: null, values: [] }],
    kernels: [{ id: 0, name: 'copy', wgsl: WGSL, entry: 'main' }],
    dispatches: [{ kernel: 0, bindings: [0, 1], workgroups: [1, 1, 1], op: 'aten.relu.default', node: 0 }],
    inputs: [{ buffer: 0, dtype: 'float32', shape: [4], storage: 'f32', name: null }],
    outputs: [{ buffer: 1, dtype: 'float32', shape: [4], storage: 'f32', name: null }],
  };
}

/** Just enough of a GPUDevice to reach pipeline creation; `pipelineError` is what it throws. */
function device(pipelineError, { loses = false } = {}) {
  let lose;
  const lost = new Promise((r) => { lose = r; });
  return {
    limits: {}, features: new Set(), lost,
    queue: { writeBuffer() {}, submit() {} },
    createBuffer: () => ({ destroy() {} }),
    createShaderModule: () => ({ getCompilationInfo: async () => ({ messages: [] }) }),
    createComputePipelineAsync: async () => {
      if (loses) lose({ reason: 'unknown', message: 'GPU process gone' });
      throw pipelineError;
    },
    createCommandEncoder: () => ({ clearBuffer() {}, finish() {} }),
    pushErrorScope() {},
    popErrorScope: async () => null,
  };
}

test('an instance gone while making a pipeline is a DeviceLostError', async () => {
  const err = Object.assign(new Error('A valid external Instance reference no longer exists.'), { reason: 'internal' });
  await assert.rejects(Executor.create(plan(), null, { device: device(err) }), DeviceLostError);
});

test('a device lost while making a pipeline is a DeviceLostError', async () => {
  await assert.rejects(Executor.create(plan(), null, { device: device(new Error('x'), { loses: true }) }), DeviceLostError);
});

test('a pipeline refused for the kernel itself stays a PlanError', async () => {
  const err = Object.assign(new Error('entry point main not found'), { reason: 'validation' });
  await assert.rejects(Executor.create(plan(), null, { device: device(err) }),
    (e) => e instanceof PlanError && !(e instanceof DeviceLostError) && /failed to make a pipeline/.test(e.message));
});
