// Plan validation and the host <-> storage conversions (int64 narrowing, packing, padding).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileBytes, fromStorage, interleaveRows, parsePlan, toStorage } from '../../web/plan.js';
import { checkFeatures, checkLimits, limitName, requestDevice } from '../../web/device.js';
import { AdapterLimitsError, ExternalDataError, InputError, PlanError } from '../../web/errors.js';

const ADD_WGSL = `@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64) fn main() {}`;

/** A well-formed two-input add plan (the shape Plan.to_json() gives). */
function addPlan() {
  return {
    method: 'forward', version: 1, max_context: null,
    buffers: [
      { id: 0, size: 28, role: 'input', label: 'x', init: null, values: [0] },
      { id: 1, size: 28, role: 'constant', label: 'w', init: { kind: 'file', offset: 16, nbytes: 28, convert: null }, values: [1] },
      { id: 2, size: 28, role: 'output', label: 'y', init: null, values: [2] },
      { id: 3, size: 8, role: 'state', label: 'flags', init: { kind: 'zeros' }, values: [] },
    ],
    kernels: [{ id: 0, name: 'add', wgsl: ADD_WGSL, entry: 'main' }],
    dispatches: [{ kernel: 0, bindings: [0, 1, 2], workgroups: [1, 1, 1], op: 'aten.add.Tensor', node: 0 }],
    inputs: [{ buffer: 0, dtype: 'float32', shape: [7], storage: 'f32', name: null }],
    outputs: [{ buffer: 2, dtype: 'float32', shape: [7], storage: 'f32', name: null }],
    state: [3], limits: { max_buffer_size: 28, max_storage_buffer_binding_size: 28, max_storage_buffers_per_shader_stage: 3 },
  };
}

test('a well-formed plan parses, from JSON text too', () => {
  const plan = addPlan();
  plan.buffers[3].init = { kind: 'words', words: [7, 0xffffffff] };
  assert.equal(parsePlan(plan, { fileSize: 44 }), plan);
  assert.deepEqual(parsePlan(JSON.stringify(plan)), plan);
});

test('joined constants: file parts back to back, counted as file bytes', () => {
  const plan = addPlan();
  plan.buffers[1].init = { kind: 'file_parts', parts: [{ offset: 0, nbytes: 12 }, { offset: 30, nbytes: 14 }] };
  assert.equal(parsePlan(plan, { fileSize: 44 }), plan);
  assert.equal(fileBytes(plan.buffers[1].init), 26);
  assert.equal(fileBytes(plan.buffers[0].init), 0);
});

test('regrouped file parts: their size is the regrouped one, the rows in their order', () => {
  const plan = addPlan();
  // 3 rows of 16 bytes in groups of 2: 4 rows' room (the last row twice)
  plan.buffers[1].init = { kind: 'file_parts', parts: [{ offset: 0, nbytes: 48 }], interleave: { row_bytes: 16, rows: 3, segments: 1, group: 2 } };
  plan.buffers[1].size = 64;
  assert.equal(parsePlan(plan, { fileSize: 48 }), plan);
  plan.buffers[1].size = 48;
  assert.throws(() => parsePlan(plan), /file parts are 64/);
  const src = Uint8Array.from({ length: 48 }, (_, i) => i);
  const out = interleaveRows(src, plan.buffers[1].init.interleave);
  assert.deepEqual([out[0], out[16], out[32], out[48], out.length], [0, 16, 32, 32, 64]);
  assert.throws(() => interleaveRows(src.subarray(0, 32), plan.buffers[1].init.interleave), PlanError);
});

test('external data: a file init reads the file it names, bounded by that file', () => {
  const plan = addPlan();
  plan.buffers[1].init.file = 2;
  assert.equal(parsePlan(plan, { fileSizes: [0, 0, 44] }), plan);
  assert.throws(() => parsePlan(plan, { fileSizes: [100, 100, 40] }), /of a 40-byte file/);
  assert.throws(() => parsePlan(plan, { fileSize: 100 }), (e) => e instanceof ExternalDataError
    && /external data file 2, but 0 were given/.test(e.message));
  plan.buffers[1].init = { kind: 'file_parts', parts: [{ offset: 0, nbytes: 12 }, { offset: 0, nbytes: 14, file: 1 }] };
  assert.equal(parsePlan(plan, { fileSizes: [12, 14] }), plan);
  assert.throws(() => parsePlan(plan, { fileSizes: [12, 13] }), /up to 14 of a 13-byte file/);
  assert.throws(() => parsePlan(plan, { fileSizes: [12] }), ExternalDataError);
  for (const bad of [-1, 1.5, '1']) {
    plan.buffers[1].init = { kind: 'file', offset: 0, nbytes: 8, convert: null, file: bad };
    assert.throws(() => parsePlan(plan), (e) => e instanceof PlanError && /file/.test(e.message));
  }
});

const ILV = (spec) => (p) => { p.buffers[1].init = { kind: 'file_parts', parts: [{ offset: 0, nbytes: 32 }], interleave: spec }; p.buffers[1].size = 64; };

const BREAKS = [
  ['interleave keys', ILV({ row_bytes: 16, rows: 2, segments: 1 }), /needs exactly/],
  ['interleave sizes', ILV({ row_bytes: 16, rows: 2, segments: 1, group: -1 }), /positive integers/],
  ['interleave group', ILV({ row_bytes: 16, rows: 2, segments: 1, group: 2 ** 40 }), /exceeds its 2 rows/],
  ['interleave rows', ILV({ row_bytes: 12, rows: 2, segments: 1, group: 2 }), /multiple of 16/],
  ['interleave bytes', ILV({ row_bytes: 16, rows: 3, segments: 1, group: 2 }), /the parts hold 32/],
  ['file parts past the end', (p) => { p.buffers[1].init = { kind: 'file_parts', parts: [{ offset: 40, nbytes: 8 }] }; }, /up to 48 of a 44-byte file/],
  ['file parts larger than the buffer', (p) => { p.buffers[1].init = { kind: 'file_parts', parts: [{ offset: 0, nbytes: 20 }, { offset: 20, nbytes: 20 }] }; }, /file parts are 40/],
  ['empty file parts', (p) => { p.buffers[1].init = { kind: 'file_parts', parts: [] }; }, /file parts/],
  ['file part range', (p) => { p.buffers[1].init = { kind: 'file_parts', parts: [{ offset: -4, nbytes: 8 }] }; }, /file parts/],
  ['version', (p) => { p.version = 2; }, /version 2/],
  ['buffer id', (p) => { p.buffers[1].id = 5; }, /buffer 1 has id 5/],
  ['buffer size', (p) => { p.buffers[0].size = 30; }, /multiple of 4/],
  ['role', (p) => { p.buffers[0].role = 'scratch'; }, /role/],
  ['file range past the end', (p) => { p.buffers[1].init.offset = 20; }, /of a 44-byte file/],
  ['file content larger than the buffer', (p) => { p.buffers[1].init.convert = 'u8_to_u32'; }, /file content is 112/],
  ['convert', (p) => { p.buffers[1].init.convert = 'f16_to_f32'; }, /convert/],
  ['init kind', (p) => { p.buffers[3].init = { kind: 'random' }; }, /init kind/],
  ['words', (p) => { p.buffers[3].init = { kind: 'words', words: [1, -2] }; }, /not u32/],
  ['too many words', (p) => { p.buffers[3].init = { kind: 'words', words: [1, 2, 3] }; }, /need 12/],
  ['dispatch kernel', (p) => { p.dispatches[0].kernel = 1; }, /dispatch 0 kernel 1/],
  ['binding', (p) => { p.dispatches[0].bindings[2] = 9; }, /binding 2 names buffer 9/],
  ['workgroups', (p) => { p.dispatches[0].workgroups = [1, 1]; }, /workgroups/],
  ['io storage', (p) => { p.inputs[0].storage = 'f16'; }, /storage/],
  ['io dtype', (p) => { p.outputs[0].dtype = 'complex64'; }, /dtype/],
  ['io larger than its buffer', (p) => { p.inputs[0].shape = [8]; }, /needs 32 bytes/],
  ['state', (p) => { p.state = [4]; }, /state\[0\]/],
  ['limits', (p) => { p.limits.max_buffer_size = -1; }, /limit max_buffer_size/],
  ['not JSON', () => '{', /not JSON/],
];

for (const [what, breakIt, message] of BREAKS) {
  test(`a plan with a bad ${what} is a PlanError`, () => {
    const plan = addPlan();
    const broken = breakIt(plan) ?? plan;
    assert.throws(() => parsePlan(broken, { fileSize: 44 }), (e) => e instanceof PlanError && message.test(e.message));
  });
}

const f32 = { dtype: 'float32', shape: [2, 3], storage: 'f32' };
const i64 = { dtype: 'int64', shape: [1], storage: 'i32' };

test('f32 inputs: TypedArray by element count or {data, shape} by exact shape', () => {
  const x = new Float32Array([1, 2, 3, 4, 5, 6]);
  assert.deepEqual(new Float32Array(toStorage(x, f32, 'input 0').buffer), x);
  assert.equal(toStorage({ data: x, shape: [2, 3] }, f32, 'input 0').byteLength, 24);
  assert.deepEqual(new Float32Array(toStorage(new Float64Array([1.5, 2, 3, 4, 5, 6]), f32, 'x').buffer)[0], 1.5);
  assert.throws(() => toStorage(new Float32Array(5), f32, 'input 0'), (e) => e instanceof InputError && /has 5 elements, the method takes float32\[2, 3\]/.test(e.message));
  assert.throws(() => toStorage({ data: x, shape: [3, 2] }, f32, 'input 0'), (e) => e instanceof InputError && /has shape \[3, 2\]/.test(e.message));
  assert.throws(() => toStorage([1, 2, 3, 4, 5, 6], f32, 'input 0'), InputError);
  assert.throws(() => toStorage(new BigInt64Array(6), f32, 'input 0'), InputError);
});

test('int64 inputs are narrowed to int32 with a range check', () => {
  const raw = toStorage(new BigInt64Array([-5n]), i64, 'input 1');
  assert.deepEqual(Array.from(new Int32Array(raw.buffer)), [-5]);
  assert.deepEqual(Array.from(new Int32Array(toStorage(new BigInt64Array([2n ** 31n - 1n]), i64, 'p').buffer)), [2 ** 31 - 1]);
  assert.deepEqual(Array.from(new Int32Array(toStorage(new Int32Array([7]), i64, 'p').buffer)), [7]);
  for (const bad of [2n ** 31n, -(2n ** 31n) - 1n, 2n ** 62n]) {
    assert.throws(() => toStorage(new BigInt64Array([bad]), i64, 'input 1'), (e) => e instanceof InputError && /outside int32/.test(e.message));
  }
  assert.throws(() => toStorage(new BigUint64Array([2n ** 63n]), i64, 'input 1'), /outside int32/);
  assert.throws(() => toStorage(new Uint32Array([2 ** 31]), i64, 'input 1'), /outside int32/);
  assert.throws(() => toStorage(new Float32Array([1]), i64, 'input 1'), (e) => e instanceof InputError && /integer array/.test(e.message));
});

test('int8/uint8 pack 4 per word and pad to 4 bytes; bool takes a u32 per element', () => {
  const i8 = { dtype: 'int8', shape: [5], storage: 'i8' };
  const raw = toStorage(new Int8Array([-1, 2, -3, 4, -5]), i8, 'x');
  assert.equal(raw.byteLength, 8);
  assert.deepEqual(Array.from(new Int8Array(raw.buffer)), [-1, 2, -3, 4, -5, 0, 0, 0]);
  assert.throws(() => toStorage(new Int16Array([1, 2, 3, 4, 200]), i8, 'x'), /outside int8/);
  const u8 = { dtype: 'uint8', shape: [1], storage: 'u8' };
  assert.equal(toStorage(new Uint8Array([255]), u8, 'x').byteLength, 4);
  assert.throws(() => toStorage(new Int8Array([-1]), u8, 'x'), /outside uint8/);
  const b = { dtype: 'bool', shape: [3], storage: 'bool' };
  assert.deepEqual(Array.from(new Uint32Array(toStorage(new Uint8Array([0, 2, 1]), b, 'x').buffer)), [0, 1, 1]);
});

test('outputs come back in their dtype', () => {
  const words = new Int32Array([3, -4, 0, 0]).buffer;
  const out64 = fromStorage(words, { dtype: 'int64', shape: [2], storage: 'i32' });
  assert.ok(out64 instanceof BigInt64Array);
  assert.deepEqual(Array.from(out64), [3n, -4n]);
  const out32 = fromStorage(words, { dtype: 'int32', shape: [1], storage: 'i32' });
  assert.ok(out32 instanceof Int32Array && out32.length === 1);
  const bools = fromStorage(new Uint32Array([0, 1, 1]).buffer, { dtype: 'bool', shape: [3], storage: 'bool' });
  assert.deepEqual(Array.from(bools), [0, 1, 1]);
  // A bool word other than 0/1 (here the poison) is an element no kernel wrote.
  assert.throws(() => fromStorage(new Uint32Array([0, 0x7fc0dead]).buffer, { dtype: 'bool', shape: [2], storage: 'bool', name: 'eq' }),
    (e) => e instanceof PlanError && /bool output eq holds the word 0x7fc0dead at element 1/.test(e.message));
  const bytes = fromStorage(new Int8Array([-2, 3, 0, 0]).buffer, { dtype: 'int8', shape: [2], storage: 'i8' });
  assert.deepEqual(Array.from(bytes), [-2, 3]);
  const floats = new Float32Array([1.25, 2]);
  const got = fromStorage(floats.buffer, { dtype: 'float32', shape: [2], storage: 'f32' });
  floats[0] = 9; // the result is a copy: staging buffers are unmapped after a call
  assert.equal(got[0], 1.25);
});

test('limits: snake_case plan names, max and min rules, AdapterLimitsError detail', () => {
  assert.equal(limitName('max_storage_buffer_binding_size'), 'maxStorageBufferBindingSize');
  const have = { maxBufferSize: 1024, minStorageBufferOffsetAlignment: 256 };
  assert.deepEqual(checkLimits({ max_buffer_size: 1000, min_storage_buffer_offset_alignment: 256, max_unknown: 5 }, have),
    { maxBufferSize: 1000, minStorageBufferOffsetAlignment: 256 });
  assert.throws(() => checkLimits({ max_buffer_size: 2048 }, have),
    (e) => e instanceof AdapterLimitsError && e.limit === 'maxBufferSize' && e.needed === 2048 && e.allowed === 1024 && /larger WebGPU limits/.test(e.message));
  assert.throws(() => checkLimits({ min_storage_buffer_offset_alignment: 64 }, have), AdapterLimitsError);
});

test('requestDevice: NoWebGPUError without navigator.gpu or an adapter, AdapterLimitsError for small limits', async () => {
  const { requestDevice } = await import('../../web/device.js');
  const { NoWebGPUError } = await import('../../web/errors.js');
  await assert.rejects(requestDevice({}, { gpu: undefined }), (e) => e instanceof NoWebGPUError && /navigator.gpu/.test(e.message));
  await assert.rejects(requestDevice({}, { gpu: { requestAdapter: async () => null } }), NoWebGPUError);
  const small = { requestAdapter: async () => ({ limits: { maxBufferSize: 64 }, requestDevice: async () => assert.fail('no device for a plan that does not fit') }) };
  await assert.rejects(requestDevice({ max_buffer_size: 65 }, { gpu: small }), AdapterLimitsError);
});

test('device features: subgroups are checked against the device, not the WGSL features', () => {
  const wgsl = new Set(['packed_4x8_integer_dot_product']);
  checkFeatures(['subgroups', 'packed_4x8_integer_dot_product'], wgsl); // no device yet
  checkFeatures(['subgroups'], wgsl, { features: new Set(['subgroups']) });
  checkFeatures([], wgsl, { features: new Set() });
  assert.throws(() => checkFeatures(['subgroups'], wgsl, { features: new Set(['timestamp-query']) }),
    (e) => e instanceof PlanError && /use subgroups, which this GPU device lacks/.test(e.message));
});

test('requestDevice asks for subgroups where the adapter has them', async () => {
  const asked = [];
  const adapterWith = (features) => ({
    requestAdapter: async () => ({
      limits: { maxBufferSize: 1 << 30, maxStorageBufferBindingSize: 1 << 30, maxStorageBuffersPerShaderStage: 8 },
      features: new Set(features),
      requestDevice: async (d) => { asked.push(d.requiredFeatures); return { createBuffer() {}, createBindGroup() {}, queue: { submit() {} } }; },
    }),
  });
  await requestDevice({}, { gpu: adapterWith(['subgroups', 'shader-f16']) });
  await requestDevice({}, { gpu: adapterWith([]) });
  assert.deepEqual(asked, [['subgroups'], []]);
});

test('WGSL features: a plan needing one the browser lacks is a PlanError', () => {
  const have = new Set(['packed_4x8_integer_dot_product']);
  checkFeatures(['packed_4x8_integer_dot_product'], have);
  checkFeatures([], new Set());
  checkFeatures(['anything'], undefined); // a browser that lists none: the compiler decides
  assert.throws(() => checkFeatures(['packed_4x8_integer_dot_product', 'x'], new Set()),
    (e) => e instanceof PlanError && /lacks \(packed_4x8_integer_dot_product, x\)/.test(e.message));
  const plan = addPlan();
  plan.features = 'dot4';
  assert.throws(() => parsePlan(plan), /features/);
  delete plan.features;
  assert.deepEqual(parsePlan(plan).features, []);
});
