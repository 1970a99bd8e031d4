// In-page helpers of the browser suite: fetch golden tensors, run a program's calls and
// compare with the reference (rel-L2 per output, NaN where the reference has a number,
// exact for integer goldens), and turn rejected promises into plain data.
import * as webpte from '/dist/index.js';

const ARRAYS = {
  float32: Float32Array, float64: Float64Array, int64: BigInt64Array, int32: Int32Array,
  int16: Int16Array, int8: Int8Array, uint8: Uint8Array, bool: Uint8Array,
};

async function tensor(t) {
  const resp = await fetch(`/golden/${t.file}`);
  if (!resp.ok) throw new Error(`golden ${t.file}: HTTP ${resp.status}`);
  return { data: new ARRAYS[t.dtype](await resp.arrayBuffer()), shape: t.shape, dtype: t.dtype };
}

function compare(actual, expected, tolerance) {
  const n = expected.data.length;
  const out = { length: actual.length, expectedLength: n, type: actual.constructor.name, relL2: null, bad: [] };
  if (actual.length !== n) return out;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    const a = Number(actual[i]);
    const e = Number(expected.data[i]);
    if ((Number.isNaN(a) && !Number.isNaN(e)) || (tolerance === 0 && a !== e)) {
      if (out.bad.length < 8) out.bad.push({ index: i, expected: e, actual: a });
    }
    num += (a - e) ** 2;
    den += e ** 2;
  }
  out.relL2 = Math.sqrt(num) / (den > 0 ? Math.sqrt(den) : 1);
  out.ok = out.bad.length === 0 && out.relL2 <= tolerance;
  return out;
}

/** Run every call of a golden entry in order on `program`; returns per-output comparisons. */
async function checkCalls(program, entry, { calls = entry.calls } = {}) {
  const result = { calls: [], run_ms: [] };
  for (const call of calls) {
    if (call.reset) await program.reset();
    const inputs = await Promise.all(call.inputs.map(tensor));
    const expected = await Promise.all(call.outputs.map(tensor));
    const t0 = performance.now();
    const outs = await program.run(inputs.map(({ data, shape }) => ({ data, shape })));
    result.run_ms.push(performance.now() - t0);
    result.calls.push(expected.map((e, j) => compare(outs[j], e, entry.tolerance)));
    result.outputCount = outs.length;
  }
  return result;
}

/**
 * Load the program of a golden entry once per `[name, options]` of `variants`, run its calls
 * and keep, per name, the first output's bits (as uint32 words) per call and the program's
 * stats: for tests that one option changes the plan and not the bytes.
 */
async function runVariants(entry, variants) {
  const runs = {};
  for (const [name, options] of variants) {
    const program = await webpte.loadProgram(`/${entry.pte}`, { ...options, poison: true });
    try {
      const outputs = [];
      for (const call of entry.calls) {
        const inputs = await Promise.all(call.inputs.map(tensor));
        const [first] = await program.run(inputs.map((t) => t.data));
        outputs.push(Array.from(new Uint32Array(first.buffer, first.byteOffset, first.byteLength / 4)));
      }
      runs[name] = { stats: program.stats, outputs };
    } finally {
      await program.dispose();
    }
  }
  return runs;
}

/** A rejected promise as data: {name, message, isWebpteError, ops}; null if it resolved. */
async function errorOf(promise) {
  try {
    await promise;
    return null;
  } catch (err) {
    return {
      name: err?.name, message: String(err?.message ?? err), ops: err?.ops ?? null,
      isWebpteError: err instanceof webpte.WebpteError,
      isClass: Object.fromEntries(['PteFormatError', 'UnsupportedOpError', 'InputError', 'PlanError', 'AdapterError']
        .map((n) => [n, err instanceof webpte[n]])),
    };
  }
}

window.suite = { webpte, tensor, checkCalls, runVariants, errorOf };
