// The op catalog's comparison of one output with its golden, as py/webpte/conformance.py
// (run_entry, compare) makes it natively: the shape exactly, then bool / int8 / int64 goldens
// exactly and float32 goldens with |actual - golden| <= atol + rtol * |golden| (a computed NaN
// matches NaN, infinities must be equal; a float holding the poison word was never written and
// matches nothing). Served to the page as /suite/catalog_compare.js (tests/browser/catalog.test.mjs)
// and imported by node (tests/js/catalog_compare.test.mjs).

/** The word the executor's `poison` fills activations and outputs with (web/executor.js). */
export const POISON_WORD = 0x7fc0dead;

const sameShape = (a, b) => a.length === b.length && a.every((d, i) => Number(d) === Number(b[i]));

function exactlyEqual(a, g) {
  return typeof a === 'bigint' && typeof g === 'bigint' ? a === g : Number(a) === Number(g);
}

/**
 * One catalog output against its golden.
 * @param {ArrayLike<number | bigint>} actual the output's elements (a TypedArray)
 * @param {number[] | null} shape the output's shape; null where the page does not report it (a
 *   call of a dynamic-shape method with other dims): then only the element count is checked
 * @param {ArrayLike<number | bigint>} golden the golden's elements
 * @param {{shape: number[], dtype: string}} spec the golden's manifest entry
 * @param {number} [atol]
 * @param {number} [rtol]
 * @returns {{status: 'pass' | 'mismatch', detail: string, first: Array<[number, number | string, number | string]>, mismatches: number}}
 */
export function compareOutput(actual, shape, golden, spec, atol = 1e-3, rtol = 1e-3) {
  const r = { status: 'pass', detail: '', first: [], mismatches: 0 };
  if (!actual) return { ...r, status: 'mismatch', detail: 'no such output' };
  if (shape != null && !sameShape(shape, spec.shape)) {
    return { ...r, status: 'mismatch', detail: `shape [${shape.join(', ')}] != golden [${spec.shape.join(', ')}]` };
  }
  if (actual.length !== golden.length) {
    return { ...r, status: 'mismatch', detail: `${actual.length} elements != golden ${golden.length} (shape [${spec.shape.join(', ')}])` };
  }
  const exact = spec.dtype !== 'float32';
  const bits = actual instanceof Float32Array ? new Uint32Array(actual.buffer, actual.byteOffset, actual.length) : null;
  for (let i = 0; i < golden.length; i++) {
    let ok;
    if (exact) {
      ok = exactlyEqual(actual[i], golden[i]);
    } else {
      const a = Number(actual[i]);
      const g = Number(golden[i]);
      const unwritten = bits !== null && bits[i] === POISON_WORD;
      ok = !unwritten && (Math.abs(a - g) <= atol + rtol * Math.abs(g)
        || (Number.isNaN(a) && Number.isNaN(g)) || (!Number.isFinite(g) && a === g));
    }
    if (!ok) {
      r.mismatches += 1;
      if (r.first.length < 4) r.first.push([i, typeof golden[i] === 'bigint' ? String(golden[i]) : Number(golden[i]), typeof actual[i] === 'bigint' ? String(actual[i]) : Number(actual[i])]);
    }
  }
  if (r.mismatches) Object.assign(r, { status: 'mismatch', detail: `${r.mismatches} of ${golden.length} elements outside tolerance` });
  return r;
}
