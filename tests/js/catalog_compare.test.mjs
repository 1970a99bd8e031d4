// The page's op-catalog comparison (tests/browser/catalog_compare.js) fails what the native
// one (py/webpte/conformance.py) fails: another shape, an unwritten (poisoned) element, a value
// outside tolerance, a wrong exact value.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { POISON_WORD, compareOutput } from '../browser/catalog_compare.js';

const f32 = (shape) => ({ shape, dtype: 'float32' });

test('a matching output passes: tolerance, NaN for NaN, equal infinities, exact ints', () => {
  const golden = new Float32Array([1, -2, NaN, Infinity]);
  assert.equal(compareOutput(new Float32Array([1.0009, -2, NaN, Infinity]), [2, 2], golden, f32([2, 2]), 1e-3, 0).status, 'pass');
  assert.equal(compareOutput(new BigInt64Array([3n, -4n]), [2], new BigInt64Array([3n, -4n]), { shape: [2], dtype: 'int64' }).status, 'pass');
  assert.equal(compareOutput(new Uint8Array([1, 0]), [2], new Int8Array([1, 0]), { shape: [2], dtype: 'bool' }).status, 'pass');
});

test('another shape of the same size fails before any value is compared', () => {
  const golden = new Float32Array([1, 2, 3, 4, 5, 6]);
  const r = compareOutput(golden.slice(), [3, 2], golden, f32([2, 3]));
  assert.equal(r.status, 'mismatch');
  assert.match(r.detail, /shape \[3, 2\] != golden \[2, 3\]/);
  assert.equal(compareOutput(golden.slice(), [6], golden, f32([6])).status, 'pass');
  assert.match(compareOutput(golden.slice(0, 5), null, golden, f32([6])).detail, /5 elements != golden 6/);
});

test('an unwritten (poisoned) float fails, even against a NaN golden', () => {
  const actual = new Float32Array(new Uint32Array([POISON_WORD, POISON_WORD]).buffer);
  const r = compareOutput(actual, [2], new Float32Array([NaN, 1]), f32([2]));
  assert.equal(r.status, 'mismatch');
  assert.equal(r.mismatches, 2);
  assert.equal(compareOutput(new Float32Array([NaN, 1]), [2], new Float32Array([NaN, 1]), f32([2])).status, 'pass');
});

test('values outside tolerance and wrong exact values fail, with the first indices', () => {
  const r = compareOutput(new Float32Array([1.002, -2, 0, -Infinity]), [4], new Float32Array([1, -2, NaN, Infinity]), f32([4]), 1e-3, 0);
  assert.equal(r.status, 'mismatch');
  assert.deepEqual(r.first.map(([i]) => i), [0, 2, 3]);
  const b = compareOutput(new Uint8Array([1]), [1], new Int8Array([0]), { shape: [1], dtype: 'bool' });
  assert.deepEqual([b.status, b.first], ['mismatch', [[0, 0, 1]]]);
  const i64 = compareOutput(new BigInt64Array([2n ** 60n + 1n]), [1], new BigInt64Array([2n ** 60n]), { shape: [1], dtype: 'int64' });
  assert.equal(i64.status, 'mismatch');
  assert.equal(compareOutput(undefined, null, new Float32Array(1), f32([1])).detail, 'no such output');
});
