// The Plan (py/webpte/plan/model.py) as the JS executor reads it: validation, and the
// conversions between host TypedArrays and the bytes an input/output buffer holds
// (mirrors to_storage_bytes / from_storage_bytes of py/webpte/native/executor.py).

import { ExternalDataError, InputError, PlanError } from './errors.js';
import { validatePlan } from './plan_validate.js';

export const PLAN_VERSION = 1;
const ROLES = new Set(['constant', 'activation', 'input', 'output', 'state', 'scalar']);
const STORAGE = new Set(['f32', 'i32', 'i8', 'u8', 'bool']);
const STORAGE_BYTES = { f32: 4, i32: 4, i8: 1, u8: 1, bool: 4 };

/** Host dtype name -> the TypedArray class a method input/output uses in the page. */
export const DTYPE_ARRAYS = Object.freeze({
  float32: Float32Array, float64: Float64Array, int32: Int32Array, int64: BigInt64Array,
  int16: Int16Array, int8: Int8Array, uint8: Uint8Array, uint16: Uint16Array,
  uint32: Uint32Array, bool: Uint8Array,
});

const isInt = (x) => Number.isSafeInteger(x) && x >= 0;

function fail(what) {
  throw new PlanError(`malformed plan: ${what}; re-plan the program with this webpte version`);
}

/**
 * Parse (if a string) and validate a Plan. `fileSizes` (the .pte's size, then each external
 * data file's), or `fileSize` (the .pte alone), when given, bound file byte ranges: a file
 * init's `file` indexes them (0 or absent: the .pte).
 * @param {string | object} planOrJson Plan.to_json() text or its parsed object
 * @param {{fileSize?: number, fileSizes?: number[]}} [options]
 * @returns {object} the plan object (fields as in Python: buffers, kernels, dispatches, ...)
 * @throws {PlanError | ExternalDataError} ExternalDataError: a file init reads a data file
 *   that was not given
 */
export function parsePlan(planOrJson, { fileSize, fileSizes = fileSize === undefined ? undefined : [fileSize] } = {}) {
  let plan = planOrJson;
  if (typeof plan === 'string') {
    try {
      plan = JSON.parse(plan);
    } catch (err) {
      fail(`not JSON (${err.message})`);
    }
  }
  if (plan === null || typeof plan !== 'object') fail('not an object');
  if (plan.version !== PLAN_VERSION) fail(`version ${plan.version}, this executor reads ${PLAN_VERSION}`);
  for (const key of ['buffers', 'kernels', 'dispatches', 'inputs', 'outputs', 'state']) {
    if (!Array.isArray(plan[key])) fail(`${key} is not a list`);
  }
  const nb = plan.buffers.length;
  plan.buffers.forEach((b, i) => {
    if (b?.id !== i) fail(`buffer ${i} has id ${b?.id}`);
    if (!isInt(b.size) || b.size === 0 || b.size % 4) fail(`buffer ${i} size ${b.size} is not a positive multiple of 4`);
    if (!ROLES.has(b.role)) fail(`buffer ${i} role ${JSON.stringify(b.role)}`);
    checkInit(b, i, fileSizes);
  });
  const buf = (x, what) => {
    if (!Number.isInteger(x) || x < 0 || x >= nb) fail(`${what} names buffer ${x} of ${nb}`);
    return plan.buffers[x];
  };
  plan.kernels.forEach((k, i) => {
    if (typeof k?.wgsl !== 'string' || typeof k.entry !== 'string') fail(`kernel ${i} has no wgsl/entry`);
  });
  const checkDispatch = (d, i) => {
    if (!Number.isInteger(d?.kernel) || d.kernel < 0 || d.kernel >= plan.kernels.length) fail(`dispatch ${i} kernel ${d?.kernel}`);
    if (!Array.isArray(d.bindings)) fail(`dispatch ${i} bindings`);
    d.bindings.forEach((b, j) => buf(b, `dispatch ${i} binding ${j}`));
    if (!Array.isArray(d.workgroups) || d.workgroups.length !== 3 || !d.workgroups.every(isInt)) {
      fail(`dispatch ${i} workgroups ${JSON.stringify(d.workgroups)}`);
    }
  };
  plan.dispatches.forEach(checkDispatch);
  // Device-side readouts of a decoder's logits (best k ids + logits): py/webpte/plan/model.py ReadoutSpec
  plan.readouts ??= [];
  if (!Array.isArray(plan.readouts)) fail('readouts is not a list');
  plan.readouts.forEach((r, i) => {
    if (!isInt(r?.k) || r.k === 0) fail(`readout ${i} k ${r?.k}`);
    const b = buf(r.buffer, `readout ${i}`);
    if (!isInt(r.read_bytes) || r.read_bytes === 0 || r.read_bytes % 4 || r.read_bytes > b.size) fail(`readout ${i} reads ${r.read_bytes} bytes of buffer ${b.id}`);
    if (!Array.isArray(r.dispatches)) fail(`readout ${i} dispatches`);
    r.dispatches.forEach((d, j) => checkDispatch(d, `${i}.${j}`));
  });
  for (const [key, list] of [['inputs', plan.inputs], ['outputs', plan.outputs]]) {
    list.forEach((io, i) => {
      const b = buf(io?.buffer, `${key}[${i}]`);
      if (!STORAGE.has(io.storage)) fail(`${key}[${i}] storage ${JSON.stringify(io.storage)}`);
      if (!Object.hasOwn(DTYPE_ARRAYS, io.dtype)) fail(`${key}[${i}] dtype ${JSON.stringify(io.dtype)}`);
      if (!Array.isArray(io.shape) || !io.shape.every(isInt)) fail(`${key}[${i}] shape ${JSON.stringify(io.shape)}`);
      if (storageBytes(io) > b.size) fail(`${key}[${i}] needs ${storageBytes(io)} bytes, buffer ${b.id} has ${b.size}`);
    });
  }
  plan.state.forEach((s, i) => buf(s, `state[${i}]`));
  if (plan.limits === null || typeof plan.limits !== 'object') fail('limits is not an object');
  for (const [k, v] of Object.entries(plan.limits)) if (!isInt(v)) fail(`limit ${k} = ${v}`);
  if (plan.max_context != null && !isInt(plan.max_context)) fail(`max_context ${plan.max_context}`);
  plan.features ??= [];
  if (!Array.isArray(plan.features) || !plan.features.every((f) => typeof f === 'string')) fail('features is not a list of names');
  validatePlan(plan);
  return plan;
}

/** The size of the file a file init (or part) reads, when sizes are known. */
function sizeOf(part, i, fileSizes) {
  const file = part.file ?? 0;
  if (!isInt(file)) fail(`buffer ${i} file ${JSON.stringify(file)}`);
  if (fileSizes === undefined) return undefined;
  if (file >= fileSizes.length) {
    throw new ExternalDataError(`buffer ${i} reads external data file ${file}, but ${fileSizes.length - 1} `
      + 'were given; pass the .ptd files written with this .pte: loadProgram(src, {data: [url, ...]})');
  }
  return fileSizes[file];
}

function checkInit(b, i, fileSizes) {
  const init = b.init;
  if (init == null || init.kind === 'zeros') return;
  if (init.kind === 'words') {
    if (!Array.isArray(init.words) || !init.words.every((w) => isInt(w) && w <= 0xffffffff)) fail(`buffer ${i} words are not u32 values`);
    if (init.words.length * 4 > b.size) fail(`buffer ${i} holds ${b.size} bytes, its ${init.words.length} words need ${init.words.length * 4}`);
    return;
  }
  if (init.kind === 'file_parts') { // file ranges back to back (joined constants)
    const parts = init.parts;
    if (!Array.isArray(parts) || !parts.length || !parts.every((p) => p && isInt(p.offset) && isInt(p.nbytes))) fail(`buffer ${i} file parts`);
    for (const p of parts) {
      const size = sizeOf(p, i, fileSizes);
      const end = p.offset + p.nbytes;
      if (size !== undefined && end > size) fail(`buffer ${i} reads bytes up to ${end} of a ${size}-byte file`);
    }
    let need = fileBytes(init);
    if (init.interleave !== undefined) {
      const why = interleaveProblem(init.interleave, need);
      if (why) fail(`buffer ${i} ${why}`);
      need = interleavedBytes(init.interleave);
    }
    if (need > b.size) fail(`buffer ${i} holds ${b.size} bytes, its file parts are ${need}`);
    return;
  }
  if (init.kind !== 'file') fail(`buffer ${i} init kind ${JSON.stringify(init.kind)}`);
  if (!isInt(init.offset) || !isInt(init.nbytes)) fail(`buffer ${i} file range`);
  const size = sizeOf(init, i, fileSizes);
  if (size !== undefined && init.offset + init.nbytes > size) {
    fail(`buffer ${i} reads bytes ${init.offset}..${init.offset + init.nbytes} of a ${size}-byte file`);
  }
  const convert = init.convert ?? null;
  if (convert !== null && convert !== 'u8_to_u32' && convert !== 'i64_to_i32') {
    fail(`buffer ${i} convert ${JSON.stringify(convert)}`);
  }
  if (convert === 'i64_to_i32' && init.nbytes % 8) fail(`buffer ${i} narrows ${init.nbytes} bytes, not whole int64 values`);
  const bytes = convert === 'u8_to_u32' ? init.nbytes * 4 : convert === 'i64_to_i32' ? init.nbytes / 2 : init.nbytes;
  if (bytes > b.size) fail(`buffer ${i} holds ${b.size} bytes, its file content is ${bytes}`);
}

const INTERLEAVE_KEYS = ['row_bytes', 'rows', 'segments', 'group'];
const BLOCK = 16; // bytes: one vec4<u32> word

/**
 * Why an init's `interleave` cannot regroup `sourceBytes` bytes of file parts, or null
 * (py/webpte/plan/interleave.py check).
 * @param {any} spec
 * @param {number} sourceBytes
 * @returns {string | null}
 */
export function interleaveProblem(spec, sourceBytes) {
  if (!spec || typeof spec !== 'object' || Array.isArray(spec)
      || Object.keys(spec).sort().join() !== [...INTERLEAVE_KEYS].sort().join()) {
    return `interleave needs exactly ${INTERLEAVE_KEYS.join(', ')}`;
  }
  if (!INTERLEAVE_KEYS.every((k) => isInt(spec[k]) && spec[k] > 0)) return 'interleave sizes must be positive integers';
  if (spec.group > spec.rows) return `interleave group ${spec.group} exceeds its ${spec.rows} rows`;
  if (spec.row_bytes % BLOCK) return `interleave row_bytes ${spec.row_bytes} is not a multiple of ${BLOCK}`;
  if (spec.segments * spec.rows * spec.row_bytes !== sourceBytes) {
    return `interleave of ${spec.segments} x ${spec.rows} rows of ${spec.row_bytes} bytes, the parts hold ${sourceBytes}`;
  }
  return null;
}

/**
 * Bytes of a regrouped buffer.
 * @param {{row_bytes: number, rows: number, segments: number, group: number}} spec
 * @returns {number}
 */
export function interleavedBytes(spec) {
  return Math.ceil(spec.rows / spec.group) * spec.segments * spec.group * spec.row_bytes;
}

/**
 * W rows regrouped for the few-row int8 kernel (py/webpte/plan/interleave.py): for each
 * group of `group` rows (the last one's missing rows repeat the last row), for each 16-byte
 * block, that block of the group's rows of each segment in turn.
 * @param {Uint8Array} src the file parts back to back: segments x rows x row_bytes
 * @param {{row_bytes: number, rows: number, segments: number, group: number}} spec
 * @returns {Uint8Array}
 */
export function interleaveRows(src, spec) {
  const why = interleaveProblem(spec, src.byteLength);
  if (why) throw new PlanError(why);
  const { row_bytes: k, rows: n, segments: s, group: g } = spec;
  const out = new Uint8Array(interleavedBytes(spec));
  const blocks = k / BLOCK;
  let at = 0;
  for (let grp = 0; grp * g < n; grp++) {
    for (let blk = 0; blk < blocks; blk++) {
      for (let seg = 0; seg < s; seg++) {
        for (let r = 0; r < g; r++) {
          const row = Math.min(grp * g + r, n - 1);
          const from = (seg * n + row) * k + blk * BLOCK;
          out.set(src.subarray(from, from + BLOCK), at);
          at += BLOCK;
        }
      }
    }
  }
  return out;
}

/**
 * Bytes of the program's files a buffer's init uploads (0 for zeros and words).
 * @param {{kind: string, nbytes?: number, parts?: {offset: number, nbytes: number}[]} | null | undefined} init
 * @returns {number}
 */
export function fileBytes(init) {
  if (init?.kind === 'file') return init.nbytes;
  if (init?.kind === 'file_parts') return init.parts.reduce((n, p) => n + p.nbytes, 0);
  return 0;
}

/** Number of elements of a shape. @param {number[]} shape */
export const numel = (shape) => shape.reduce((a, b) => a * b, 1);

/** Bytes an input/output occupies in its buffer (before padding to 4). */
export const storageBytes = (io) => numel(io.shape) * STORAGE_BYTES[io.storage];

/** How a method input/output is written: `float32[1, 4, 64]`. */
export const describeIO = (io) => `${io.dtype}[${io.shape.join(', ')}]`;

const INTEGER_ARRAYS = [Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array,
  Int32Array, Uint32Array, BigInt64Array, BigUint64Array];
const isTyped = (x) => ArrayBuffer.isView(x) && !(x instanceof DataView);
const isIntegerArray = (x) => INTEGER_ARRAYS.some((c) => x instanceof c);
const isBigArray = (x) => x instanceof BigInt64Array || x instanceof BigUint64Array;
const NARROW_NAMES = { i32: 'int32', i8: 'int8', u8: 'uint8' };
const RANGES = { i32: [-(2 ** 31), 2 ** 31 - 1, Int32Array], i8: [-128, 127, Int8Array], u8: [0, 255, Uint8Array] };

/**
 * A host input -> the bytes its buffer holds: Uint8Array padded to a multiple of 4 bytes.
 * `value` is a TypedArray (its length must be the method's element count) or
 * `{data: TypedArray, shape: number[]}` (the shape must match exactly). Integer inputs are
 * narrowed (int64 BigInt64Array -> int32) with a range check.
 * @param {ArrayBufferView | {data: ArrayBufferView, shape: number[]}} value
 * @param {{dtype: string, shape: number[], storage: string}} spec
 * @param {string} what e.g. "input 0", for messages
 * @returns {Uint8Array}
 * @throws {InputError}
 */
export function toStorage(value, spec, what) {
  let data = value;
  const want = describeIO(spec);
  if (value !== null && typeof value === 'object' && !isTyped(value) && 'data' in value) {
    data = value.data;
    const shape = Array.from(value.shape ?? [], Number);
    if (shape.length !== spec.shape.length || shape.some((d, i) => d !== spec.shape[i])) {
      throw new InputError(`${what} has shape [${shape.join(', ')}], the method takes ${want}`);
    }
  }
  if (!isTyped(data)) {
    throw new InputError(`${what} is not a TypedArray (or {data, shape}); the method takes ${want}`);
  }
  const n = numel(spec.shape);
  if (data.length !== n) {
    throw new InputError(`${what} has ${data.length} elements, the method takes ${want} (${n} elements)`);
  }
  const kind = spec.storage;
  let out;
  if (kind === 'f32') {
    if (isBigArray(data)) throw new InputError(`${what} is a ${data.constructor.name}, the method takes ${want}`);
    out = data instanceof Float32Array ? data : Float32Array.from(data);
  } else {
    if (!isIntegerArray(data)) {
      throw new InputError(`${what} is a ${data.constructor.name}, the method takes ${want} (an integer array)`);
    }
    if (kind === 'bool') {
      out = new Uint32Array(n);
      for (let i = 0; i < n; i++) out[i] = data[i] ? 1 : 0;
    } else {
      const [lo, hi, Cls] = RANGES[kind];
      const big = isBigArray(data);
      out = new Cls(n);
      const [blo, bhi] = [BigInt(lo), BigInt(hi)];
      for (let i = 0; i < n; i++) {
        const v = data[i];
        if (big ? v < blo || v > bhi : v < lo || v > hi) {
          throw new InputError(`${what} holds values outside ${NARROW_NAMES[kind]} (element ${i} is ${v}); `
            + `the method takes ${want}`);
        }
        out[i] = big ? Number(v) : v;
      }
    }
  }
  const bytes = new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
  const padded = Math.max(4, Math.ceil(bytes.length / 4) * 4);
  if (padded === bytes.length) return bytes;
  const copy = new Uint8Array(padded);
  copy.set(bytes);
  return copy;
}

/**
 * Bytes read back from an output buffer -> the host TypedArray of the output's dtype
 * (int64 outputs come back as BigInt64Array, bool as Uint8Array of 0/1). Kernels write a bool
 * as the word 0 or 1: any other word (the executor's poison) is an element none wrote.
 * @param {ArrayBuffer} raw at least storageBytes(spec) bytes
 * @param {{dtype: string, shape: number[], storage: string, name?: string}} spec
 * @returns {ArrayBufferView}
 * @throws {PlanError} a bool word that is neither 0 nor 1
 */
export function fromStorage(raw, spec) {
  const n = numel(spec.shape);
  const Stored = { f32: Float32Array, i32: Int32Array, i8: Int8Array, u8: Uint8Array, bool: Uint32Array }[spec.storage];
  const stored = new Stored(raw, 0, n);
  const Host = DTYPE_ARRAYS[spec.dtype];
  if (spec.storage === 'bool') {
    const i = stored.findIndex((v) => v > 1);
    if (i >= 0) {
      throw new PlanError(`bool output${spec.name ? ` ${spec.name}` : ''} holds the word 0x${stored[i].toString(16)} at element ${i}, `
        + 'neither 0 nor 1: no kernel wrote it; this is a webpte bug, please report it');
    }
  }
  if (spec.dtype === 'bool') return Uint8Array.from(stored, (v) => (v ? 1 : 0));
  if (Host === Stored) return stored.slice();
  if (Host === BigInt64Array || Host === BigUint64Array) return Host.from(stored, (v) => BigInt(v));
  return Host.from(stored);
}
