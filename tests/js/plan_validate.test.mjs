// The page's plan validator (web/plan_validate.js): each rule fails on a plan that breaks it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parsePlan } from '../../web/plan.js';
import { bindingAccess, validatePlan, workgroupSize } from '../../web/plan_validate.js';
import { PlanError } from '../../web/errors.js';

const WGSL = (wg = '64') => `@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(${wg}) fn main() {}`;

function plan() {
  return {
    method: 'forward', version: 1, max_context: null, readouts: [], features: [],
    buffers: [
      { id: 0, size: 16, role: 'input', label: 'x', init: null, values: [] },
      { id: 1, size: 16, role: 'activation', label: 'h', init: null, values: [] },
      { id: 2, size: 16, role: 'output', label: 'y', init: null, values: [] },
    ],
    kernels: [{ id: 0, name: 'copy', wgsl: WGSL(), entry: 'main' }],
    dispatches: [
      { kernel: 0, bindings: [0, 1], workgroups: [1, 1, 1], op: 'aten.relu.default', node: 0 },
      { kernel: 0, bindings: [1, 2], workgroups: [1, 1, 1], op: 'aten.neg.default', node: 1 },
    ],
    inputs: [{ buffer: 0, dtype: 'float32', shape: [4], storage: 'f32', name: null }],
    outputs: [{ buffer: 2, dtype: 'float32', shape: [4], storage: 'f32', name: null }],
    state: [], limits: {},
  };
}

const rejects = (p, pattern, limits) => assert.throws(() => validatePlan(p, limits),
  (e) => e instanceof PlanError && pattern.test(e.message));

test('a valid plan passes, parsed or not', () => {
  validatePlan(plan(), { maxStorageBufferBindingSize: 16, maxComputeWorkgroupSizeX: 64 });
  parsePlan(JSON.stringify(plan()));
});

test('bindings are read from the WGSL, in binding order', () => {
  assert.deepEqual(bindingAccess(`@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@group(0) @binding(0) var<uniform> u: P;  @group(0) @binding(2) var<storage> z: array<u32>;`), ['uniform', 'read_write', 'read']);
  assert.deepEqual(workgroupSize('@workgroup_size(8, 4)'), [8, 4, 1]);
  assert.equal(workgroupSize('@workgroup_size(WG)'), null);
});

test('one buffer bound writable and read-only in one dispatch is refused (usage scope)', () => {
  const p = plan();
  p.dispatches[1].bindings = [1, 1];
  rejects(p, /dispatch 1 \(aten\.neg\.default, node 1\) binds h both writable and read-only/);
});

test('a binding count unlike the kernel\'s is refused', () => {
  const p = plan();
  p.dispatches[0].bindings = [0, 1, 2];
  rejects(p, /binds 3 buffers, kernel copy declares 2/);
});

test('a buffer read before anything writes it is refused, an unwritten output too', () => {
  const p = plan();
  p.dispatches.reverse();
  rejects(p, /reads buffer h before anything writes it/);
  const q = plan();
  q.dispatches.pop();
  rejects(q, /output buffer y is never written/);
});

test('limits: binding size, buffer size, bindings per stage, workgroups, workgroup size', () => {
  rejects(plan(), /maxStorageBufferBindingSize/, { maxStorageBufferBindingSize: 8 });
  rejects(plan(), /maxBufferSize/, { maxBufferSize: 8 });
  rejects(plan(), /binds 2 buffers, the device allows 1/, { maxStorageBuffersPerShaderStage: 1 });
  const p = plan();
  p.dispatches[0].workgroups = [70000, 1, 1];
  rejects(p, /each count must be 1\.\.65535/, { maxComputeWorkgroupsPerDimension: 65535 });
  const q = plan();
  q.kernels[0].wgsl = WGSL('512');
  rejects(q, /maxComputeWorkgroupSizeX/, { maxComputeWorkgroupSizeX: 256 });
  rejects(q, /maxComputeInvocationsPerWorkgroup/, { maxComputeInvocationsPerWorkgroup: 256 });
});
