// Tier 2: webpte in headless Chromium (WebGPU on SwiftShader) against goldens written by
// Python. Pages come from a 127.0.0.1 server started here; every other request is blocked
// and counted, and the count must stay zero. Needs `npm run build` (dist/) and the native
// venv (.venv, for the goldens); `make test-web` does both.
//
// Env: WEBPTE_CHROMIUM (default /usr/bin/chromium), WEBPTE_PY (default .venv/bin/python),
// WEBPTE_WEB_ALLOW_UNSUPPORTED=1 reports fixtures that do not plan for want of a kernel instead
// of failing them (the page must still raise UnsupportedOpError naming the same ops),
// WEBPTE_WEB_VERBOSE=1 echoes the page's console.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSuitePage } from './browser.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const GOLDEN = join(ROOT, 'build/web-test');
const PY = process.env.WEBPTE_PY ?? join(ROOT, '.venv/bin/python');
const ALLOW_UNSUPPORTED = process.env.WEBPTE_WEB_ALLOW_UNSUPPORTED === '1';
const LONG = { timeout: 600_000 };
const PROBE = 'http://blocked.invalid/';

assert.ok(existsSync(join(ROOT, 'dist/index.js')), 'dist/ is missing: run `npm run build` first');
execFileSync(PY, [join(ROOT, 'tests/browser/make_goldens.py'), GOLDEN], { stdio: ['ignore', 'ignore', 'inherit'] });
const manifest = JSON.parse(readFileSync(join(GOLDEN, 'manifest.json'), 'utf8'));

let server;
let page;
let blocked;
let close;
const timings = [];

before(async () => {
  ({ server, page, blocked, close } = await openSuitePage({
    '/dist/': join(ROOT, 'dist'), '/fixtures/': join(ROOT, 'tests/fixtures'),
    '/golden/': GOLDEN, '/suite/': join(ROOT, 'tests/browser'),
  }));
});

/** A timing line: a diagnostic of the test, and on stdout for `make test-web` logs. */
function note(t, line) {
  t.diagnostic(line);
  timings.push(line);
}

after(async () => {
  for (const line of timings) console.log(`# timing (ms): ${line}`);
  await close?.();
});

function describeFailures(result) {
  const lines = [];
  result.calls.forEach((outs, i) => outs.forEach((o, j) => {
    if (!o.ok) {
      lines.push(`call ${i} output ${j}: ${o.type} length ${o.length} (expected ${o.expectedLength}), `
        + `rel-L2 ${o.relL2?.toExponential(2)}; first mismatches ${JSON.stringify(o.bad)}`);
    }
  }));
  return lines.join('\n');
}

describe('environment', () => {
  test('WebGPU is available to the page and its worker', async () => {
    const info = await page.evaluate(async () => ({ page: !!(await navigator.gpu?.requestAdapter()) }));
    assert.equal(info.page, true, 'no WebGPU adapter: start Chromium with --enable-unsafe-webgpu');
  });

  test('the request guard sees page and worker requests to other hosts', async () => {
    const before = blocked.length;
    await page.evaluate(async (probe) => {
      await fetch(`${probe}page`).catch(() => {});
      const w = new Worker(URL.createObjectURL(new Blob([`fetch('${probe}worker').catch(() => {}).finally(() => postMessage(1))`])));
      await new Promise((r) => { w.onmessage = r; });
      w.terminate();
    }, PROBE);
    assert.deepEqual(blocked.slice(before).sort(), [`${PROBE}page`, `${PROBE}worker`]);
  });
});

describe('plans made natively, executed in the page (synthetic graphs)', () => {
  for (const entry of manifest.synthetic) {
    test(entry.name, LONG, async (t) => {
      const result = await page.evaluate(async (e) => {
        const plan = await (await fetch(`/${e.plan}`)).text();
        const program = await suite.webpte.loadProgram(`/${e.blob}`, { plan, poison: true });
        try {
          return { ...(await suite.checkCalls(program, e)), stats: program.stats };
        } finally {
          await program.dispose();
        }
      }, entry);
      assert.ok(result.calls.flat().every((o) => o.ok), describeFailures(result));
      note(t, `${entry.name}: run ${result.run_ms.map((x) => x.toFixed(1)).join(', ')}`);
    });
  }

  test('wrong inputs are InputErrors; a disposed program is a DisposedError', LONG, async () => {
    const entry = manifest.synthetic.find((e) => e.name === 'bmm_f32');
    const errs = await page.evaluate(async (e) => {
      const plan = await (await fetch(`/${e.plan}`)).text();
      const program = await suite.webpte.loadProgram(`/${e.blob}`, { plan });
      const [a, b] = await Promise.all(e.calls[0].inputs.map(suite.tensor));
      const out = {
        shape: await suite.errorOf(program.run([{ data: a.data, shape: [2, 33, 9] }, b])),
        count: await suite.errorOf(program.run([a.data])),
        length: await suite.errorOf(program.run([a.data.subarray(1), b.data])),
        dtype: await suite.errorOf(program.run([new Int32Array(a.data.length), b.data])),
        plain: await suite.errorOf(program.run([Array.from(a.data), b.data])),
        ok: await suite.errorOf(program.run([a.data, b.data])),
      };
      await program.dispose();
      out.disposed = await suite.errorOf(program.run([a.data, b.data]));
      return out;
    }, entry);
    for (const k of ['shape', 'count', 'length', 'plain']) {
      assert.equal(errs[k]?.name, 'InputError', `${k}: ${JSON.stringify(errs[k])}`);
      assert.ok(errs[k].isWebpteError && errs[k].isClass.InputError);
    }
    assert.match(errs.shape.message, /has shape \[2, 33, 9\], the method takes float32\[2, 9, 33\]/);
    assert.match(errs.count.message, /takes 2 inputs/);
    assert.equal(errs.dtype, null, 'int32 data for an f32 input converts like numpy');
    assert.equal(errs.ok, null);
    assert.equal(errs.disposed?.name, 'DisposedError');
  });
});

describe('every fixture program, planned by Python in the page', () => {
  for (const entry of manifest.fixtures) {
    test(entry.name, LONG, async (t) => {
      const result = await page.evaluate(async (e) => {
        const err = await suite.errorOf((async () => {
          window.lastProgram = await suite.webpte.loadProgram(`/${e.pte}`, { poison: true });
        })());
        if (err) return { error: err };
        const program = window.lastProgram;
        try {
          const r = await suite.checkCalls(program, e);
          r.stats = program.stats;
          if (program.maxContext != null) {
            await program.reset(); // a fresh conversation gives the first call's outputs again
            r.afterReset = (await suite.checkCalls(program, e, { calls: e.calls.slice(0, 1) })).calls[0];
          }
          return r;
        } finally {
          await program.dispose();
        }
      }, entry);
      if (entry.native.status === 'unsupported') {
        const msg = `${entry.name} does not plan: missing kernels ${entry.native.ops.join(', ')}`;
        assert.equal(result.error?.name, 'UnsupportedOpError', JSON.stringify(result.error));
        assert.deepEqual(result.error.ops, entry.native.ops);
        if (!ALLOW_UNSUPPORTED) assert.fail(`${msg} (WEBPTE_WEB_ALLOW_UNSUPPORTED=1 reports it instead)`);
        console.log(`# NOT PLANNED: ${msg}`);
        return t.diagnostic(`NOT PLANNED: ${msg}`);
      }
      assert.equal(result.error, undefined, `${entry.name} failed to load in the page: ${JSON.stringify(result.error)}`);
      assert.equal(result.outputCount, entry.calls[0].outputs.length);
      assert.ok(result.calls.flat().every((o) => o.ok), describeFailures(result));
      if (result.afterReset) assert.ok(result.afterReset.every((o) => o.ok), `after reset: ${JSON.stringify(result.afterReset)}`);
      const s = result.stats;
      // Python saw only the flatbuffer regions: never the constants, which go file -> GPU.
      // (A program without constant bytes, e.g. an inline delegate, may be read more than once.)
      assert.equal(typeof s.bytes_read_by_python, 'number', JSON.stringify(s));
      if (s.constant_bytes > 0) assert.ok(s.bytes_read_by_python + s.constant_bytes <= s.file_bytes, JSON.stringify(s));
      note(t, `${entry.name}: Python boot ${s.python_boot_ms.toFixed(0)}, plan ${s.plan_ms.toFixed(0)} (in Python) / ${s.plan_total_ms.toFixed(0)} (with calls into JS), `
        + `upload ${s.upload_ms.toFixed(0)} (pipelines ${s.pipelines_ms.toFixed(0)} for ${s.kernels} kernels${s.features.includes('packed_4x8_integer_dot_product') ? ', dot4 offered' : ''}), run ${result.run_ms.map((x) => x.toFixed(1)).join(', ')}; `
        + `Python read ${s.bytes_read_by_python} of ${s.file_bytes} bytes`);
    });
  }
});

describe('fusion is the planner\'s choice, the outputs are not', () => {
  test('the q8 decoder planned op by op, elementwise-fused and fully fused gives the same bytes', LONG, async () => {
    const entry = manifest.fixtures.find((e) => e.name === 'decoder_q8_tiny');
    const out = await page.evaluate(async (e) => ({
      ...await suite.runVariants(e, ['none', 'elementwise', 'all'].map((fusion) => [fusion, { fusion }])),
      bad: await suite.errorOf(suite.webpte.loadProgram(`/${e.pte}`, { fusion: 'most' })),
    }), entry);
    const dispatches = ['none', 'elementwise', 'all'].map((f) => out[f].stats.dispatches);
    assert.ok(dispatches[0] > dispatches[1] && dispatches[1] > dispatches[2], JSON.stringify(dispatches));
    assert.deepEqual(out.elementwise.outputs, out.none.outputs, 'elementwise-fused vs op by op, bit for bit');
    assert.deepEqual(out.all.outputs, out.none.outputs, 'fully fused vs op by op, bit for bit');
    assert.equal(out.bad?.name, 'InputError', JSON.stringify(out.bad));
    // The page tells the planner its adapter (adapter_device:): SwiftShader's int8 linears
    // take the portable dot, which it runs faster than its dot4I8Packed (hints.DRIVER_HINTS).
    assert.ok(!out.all.stats.features.includes('packed_4x8_integer_dot_product'), JSON.stringify(out.all.stats.features));
  });

  test('limits: a capped binding splits the weights (same bytes); \'default\' makes a device with WebGPU\'s defaults', LONG, async () => {
    const entry = manifest.fixtures.find((e) => e.name === 'decoder_q8_tiny');
    const out = await page.evaluate(async (e) => ({
      ...await suite.runVariants(e, [['whole', { limits: null }], ['split', { limits: { maxStorageBufferBindingSize: 8192 } }],
        ['default', { limits: 'default' }]]),
      bad: await suite.errorOf(suite.webpte.loadProgram(`/${e.pte}`, { limits: 'huge' })),
    }), entry);
    assert.ok(out.split.stats.dispatches > out.whole.stats.dispatches, JSON.stringify([out.whole.stats.dispatches, out.split.stats.dispatches]));
    assert.deepEqual(out.split.outputs, out.whole.outputs, 'split weights vs whole, bit for bit');
    assert.deepEqual(out.default.outputs, out.whole.outputs, 'a device with the default limits');
    assert.equal(out.default.stats.device_binding_limit, 134217728, 'the device was made with the default binding limit');
    // WebGPU gives a device no less than its default limits: a smaller cap bounds the plan only
    assert.equal(out.split.stats.device_binding_limit, 134217728, 'a cap below the default: the default');
    assert.equal(out.bad?.name, 'InputError', JSON.stringify(out.bad));
  });

  test('autotune times the decode variants once, caches the choice and keeps the outputs', LONG, async () => {
    const entry = manifest.fixtures.find((e) => e.name === 'decoder_q8_tiny');
    const f32 = manifest.fixtures.find((e) => e.name === 'decoder_f32_tiny');
    const untuned = await page.evaluate(async (url) => {
      const program = await suite.webpte.loadProgram(url, { autotune: true });
      try {
        return program.stats.autotune;
      } finally {
        await program.dispose();
      }
    }, `/${f32.pte}`);
    assert.equal(untuned, null, 'an f32 decoder has no int8 decode linears to tune');
    const [plain, first, again] = await page.evaluate(async (e) => {
      const runs = [];
      for (const autotune of [false, true, true]) {
        const stages = new Set();
        const program = await suite.webpte.loadProgram(`/${e.pte}`, {
          autotune, poison: true, onProgress: (ev) => stages.add(ev.stage), chunkBytes: 16384,
        });
        try {
          const outputs = [];
          for (const call of e.calls) {
            const inputs = await Promise.all(call.inputs.map(suite.tensor));
            const [logits] = await program.run(inputs.map((t) => t.data));
            outputs.push(Array.from(new Uint32Array(logits.buffer, logits.byteOffset, logits.length)));
          }
          const { streamed, largest_held: held, file_bytes: size } = program.stats;
          runs.push({ autotune: program.stats.autotune, stages: [...stages], outputs, streamed, held, size });
        } finally {
          await program.dispose();
        }
      }
      return runs;
    }, entry);
    // Tuning streams the file into each candidate as the load does: none holds it whole.
    for (const run of [plain, first, again]) {
      assert.ok(run.streamed && run.held < run.size, JSON.stringify({ ...run, outputs: undefined }));
    }
    assert.equal(plain.autotune, null);
    assert.ok(!plain.stages.includes('autotune'));
    // SwiftShader is a CPU adapter: the candidates are py/webpte/autotune.CANDIDATES["CPU"],
    // "skinny+q8_f32:on" timed as "skinny" (SwiftShader's own hint: the same kernels).
    const hints = ['q8_decode:skinny', 'q8_decode:skinny+q8_f32:off', 'q8_decode:skinny8'];
    assert.equal(first.autotune.cached, false, JSON.stringify(first.autotune));
    assert.deepEqual(Object.keys(first.autotune.times_ms).sort(), hints);
    assert.ok(Object.values(first.autotune.times_ms).every((t) => t > 0), JSON.stringify(first.autotune));
    assert.ok(hints.includes(first.autotune.hint) && first.stages.includes('autotune'));
    const fastest = Math.min(...Object.values(first.autotune.times_ms));
    assert.equal(first.autotune.times_ms[first.autotune.hint], fastest);
    // The second load reads the choice: nothing is timed.
    assert.equal(again.autotune.cached, true);
    assert.equal(again.autotune.hint, first.autotune.hint);
    assert.ok(!again.stages.includes('autotune'), JSON.stringify(again.stages));
    // Every variant computes the same accumulators and epilogues: the same bytes.
    assert.deepEqual(first.outputs, plain.outputs, 'autotuned vs default plan, bit for bit');
    assert.deepEqual(again.outputs, plain.outputs);
  });
});

describe('errors surface as typed errors in the page', () => {
  const base = manifest.fixtures[0];

  test('a corrupted .pte is a PteFormatError', LONG, async () => {
    const errs = await page.evaluate(async (url) => {
      const good = new Uint8Array(await (await fetch(url)).arrayBuffer());
      const badId = good.slice();
      badId.set([0x58, 0x58, 0x58, 0x58], 4); // file identifier ET12 -> XXXX
      const truncated = good.slice(0, 64);
      const out = {
        badId: await suite.errorOf(suite.webpte.loadProgram(badId.buffer, { transfer: true })),
        truncated: await suite.errorOf(suite.webpte.loadProgram(new Blob([truncated]))),
      };
      out.detached = badId.buffer.byteLength === 0;
      return out;
    }, `/${base.pte}`);
    assert.ok(errs.detached, 'transfer: true moves the ArrayBuffer to the worker');
    delete errs.detached;
    for (const e of Object.values(errs)) {
      assert.equal(e?.name, 'PteFormatError', JSON.stringify(e));
      assert.ok(e.isWebpteError && e.isClass.PteFormatError);
      assert.match(e.message, /malformed \.pte/);
    }
    assert.match(errs.badId.message, /file identifier/);
  });

  test('progress events stream from the worker while a program loads', LONG, async () => {
    const stages = await page.evaluate(async (url) => {
      const seen = [];
      const program = await suite.webpte.loadProgram(url, { onProgress: (e) => seen.push(e.stage) });
      await program.dispose();
      return seen;
    }, `/${base.pte}`);
    assert.deepEqual(stages.filter((s) => s !== 'fetch' && s !== 'python'), ['plan', 'upload', 'compile', 'ready']);
    // planned from the preflight's Range reads, then the body streams into the GPU buffers
    assert.ok(stages.indexOf('upload') < stages.indexOf('fetch') && stages.lastIndexOf('fetch') < stages.indexOf('compile'), stages.join(', '));
  });

  test('a missing method is an InputError; a missing file is an InputError', LONG, async () => {
    const errs = await page.evaluate(async (url) => ({
      method: await suite.errorOf(suite.webpte.loadProgram(url, { method: 'no_such_method' })),
      missing: await suite.errorOf(suite.webpte.loadProgram('/fixtures/no_such_file.pte')),
    }), `/${base.pte}`);
    assert.equal(errs.method?.name, 'InputError', JSON.stringify(errs.method));
    assert.match(errs.method.message, /no method 'no_such_method'/);
    assert.equal(errs.missing?.name, 'InputError', JSON.stringify(errs.missing));
    assert.match(errs.missing.message, /HTTP 404/);
  });

  test('a plan beyond the adapter limits is an AdapterLimitsError; bad kernels and bindings are PlanErrors', LONG, async () => {
    const entry = manifest.synthetic.find((e) => e.name === 'handmade_bool_constant');
    const errs = await page.evaluate(async (e) => {
      const plan = await (await fetch(`/${e.plan}`)).json();
      const blob = `/${e.blob}`;
      const big = structuredClone(plan);
      big.limits.max_storage_buffer_binding_size = 2 ** 52;
      const bad = structuredClone(plan);
      bad.kernels[0].wgsl = bad.kernels[0].wgsl.replace('i32(a[g.x])', 'i32(a[g.x] + nope)');
      const malformed = structuredClone(plan);
      malformed.dispatches[0].bindings = [0, 1, 7];
      const aliased = structuredClone(plan); // one buffer read and written by one dispatch
      aliased.dispatches[0].bindings = [1, 1, 2];
      return {
        refused: await suite.errorOf(suite.webpte.loadProgram(blob, { plan: aliased })),
        big: await suite.errorOf(suite.webpte.loadProgram(blob, { plan: big })),
        bad: await suite.errorOf(suite.webpte.loadProgram(blob, { plan: bad })),
        malformed: await suite.errorOf(suite.webpte.loadProgram(blob, { plan: malformed })),
      };
    }, entry);
    assert.equal(errs.big?.name, 'AdapterLimitsError', JSON.stringify(errs.big));
    assert.ok(errs.big.isClass.AdapterError);
    assert.match(errs.big.message, /maxStorageBufferBindingSize = 4503599627370496/);
    assert.equal(errs.bad?.name, 'PlanError', JSON.stringify(errs.bad));
    assert.match(errs.bad.message, /kernel handmade failed to compile/);
    assert.equal(errs.malformed?.name, 'PlanError', JSON.stringify(errs.malformed));
    assert.match(errs.malformed.message, /binding 2 names buffer 7/);
    // The plan validator refuses it before any device sees it (WebGPU would at submit).
    assert.equal(errs.refused?.name, 'PlanError', JSON.stringify(errs.refused));
    assert.match(errs.refused.message, /dispatch 0 \(handmade, node 0\) binds output1 both writable and read-only/);
  });

  test('a decoder refuses input_pos past its context', LONG, async (t) => {
    const decoder = manifest.fixtures.find((e) => e.name.startsWith('decoder_') && e.native.status === 'ok');
    if (!decoder) return t.skip('no decoder fixture plans');
    const err = await page.evaluate(async (e) => {
      const program = await suite.webpte.loadProgram(`/${e.pte}`);
      const [x] = await Promise.all(e.calls[0].inputs.map(suite.tensor));
      const out = await suite.errorOf(program.run([x.data, new BigInt64Array([BigInt(program.maxContext)])]));
      await program.dispose();
      return out;
    }, decoder);
    assert.equal(err?.name, 'InputError', JSON.stringify(err));
    assert.match(err.message, /exceeds the context/);
  });
});

describe('runtime', () => {
  test('runtimeInfo names the adapter the worker used', async () => {
    const info = await page.evaluate(() => suite.webpte.runtimeInfo());
    assert.equal(info.python, true);
    assert.equal(info.programs, 0, 'every program of the suite was disposed');
    assert.ok(info.adapter && typeof info.adapter.vendor === 'string', JSON.stringify(info));
  });
});

describe('network', () => {
  test('no request left 127.0.0.1 (besides the guard probes)', () => {
    const leaked = blocked.filter((u) => !u.startsWith(PROBE));
    assert.deepEqual(leaked, []);
    assert.ok((server.hits.get('/dist/wheels/pyodide-lock.json') ?? 0) >= 1, 'the bundled lock file was used');
    assert.ok([...server.hits.keys()].some((p) => p.startsWith('/dist/wheels/webpte-')), 'the bundled webpte wheel was used');
  });
});
