// Run one program in the page (headless Chromium, WebGPU on SwiftShader) on the calls of an
// npz and compare with its references: what `webpte run --tolerance` does natively.
//   node tools/run_page.mjs PROGRAM.pte CALLS.npz [--limits default|JSON] [--tolerance T [--argmax]] [--chunk-bytes N]
// Prints the load split by stage (fetch, Python boot, plan, upload, pipelines), each call's
// time and rel-L2 per output, the worker's peak JS heap (with ArrayBuffers) during the load (CDP
// Runtime.getHeapUsage on the worker target, polled: V8 heap + ArrayBuffer
// backing stores), Pyodide's wasm heap, the peak Pss of Chromium's processes (Linux /proc:
// tools/browser_memory.mjs) and the largest
// chunk of weights the loader held; exits 1
// when an output has no reference, another shape, or a rel-L2 above --tolerance (or NaN).
// Needs `npm run build` (dist/; WEBPTE_DIST=DIR serves another build).
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSuitePage } from '../tests/browser/browser.mjs';
import { heapPoller } from './worker_heap.mjs';
import { pssPoller } from './browser_memory.mjs';
import { readNpz } from '../tests/bundler/npz.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

function options(argv) {
  const [pte, npz, ...rest] = argv;
  if (!pte || !npz) throw new Error('usage: node tools/run_page.mjs PROGRAM.pte CALLS.npz [--limits default|JSON] [--tolerance T [--argmax]] [--chunk-bytes N]');
  const opts = { pte: resolve(pte), npz: resolve(npz), limits: null, tolerance: null, chunkBytes: undefined };
  for (let i = 0; i < rest.length; i += 2) {
    if (rest[i] === '--limits') opts.limits = rest[i + 1] === 'default' ? 'default' : JSON.parse(rest[i + 1]);
    else if (rest[i] === '--tolerance') opts.tolerance = Number(rest[i + 1]);
    else if (rest[i] === '--argmax') { opts.argmax = true; i--; }
    else if (rest[i] === '--chunk-bytes') opts.chunkBytes = Number(rest[i + 1]); // loadProgram's chunkBytes
    else throw new Error(`unknown option ${rest[i]}`);
  }
  return opts;
}

/** The npz's calls in order: [{inputs: [{dtype, shape, b64}], refs: [{dtype, shape, data}]}]. */
function calls(npz) {
  const arrays = readNpz(npz);
  const names = Object.keys(arrays);
  const prefixes = names.includes('input_0') ? ['']
    : [...new Set(names.filter((n) => /^call\d+_input_/.test(n)).map((n) => n.split('_')[0] + '_'))]
      .sort((a, b) => Number(a.slice(4, -1)) - Number(b.slice(4, -1)));
  return prefixes.map((p) => {
    const pick = (kind) => names.filter((n) => n.startsWith(`${p}${kind}_`))
      .sort((a, b) => Number(a.split('_').pop()) - Number(b.split('_').pop())).map((n) => arrays[n]);
    return {
      inputs: pick('input').map((a) => ({ dtype: a.dtype, shape: a.shape, b64: Buffer.from(a.bytes).toString('base64') })),
      refs: pick('output'),
    };
  });
}

function typed(a) {
  const C = { float32: Float32Array, int64: BigInt64Array, int32: Int32Array, int8: Int8Array, uint8: Uint8Array, bool: Uint8Array, float64: Float64Array }[a.dtype];
  const b = Buffer.from(a.bytes);
  return new C(b.buffer, b.byteOffset, b.byteLength / C.BYTES_PER_ELEMENT);
}

/** Rows (along the last axis of `shape`) whose argmax differs between `got` and `ref`. */
function argmaxDiffers(got, ref, shape) {
  const n = shape.at(-1) ?? 1;
  let differ = 0;
  for (let row = 0; row + n <= ref.length; row += n) {
    let a = row;
    let b = row;
    for (let i = row + 1; i < row + n; i++) {
      if (Number(got[i]) > Number(got[a])) a = i;
      if (Number(ref[i]) > Number(ref[b])) b = i;
    }
    if (a !== b) differ++;
  }
  return { differ, rows: n ? ref.length / n : 0 };
}

function relL2(got, ref) {
  let num = 0;
  let den = 0;
  for (let i = 0; i < ref.length; i++) {
    const r = Number(ref[i]);
    const d = Number(got[i]) - r;
    num += d * d;
    den += r * r;
  }
  return Math.sqrt(num) / (den > 0 ? Math.sqrt(den) : 1);
}

async function main() {
  const opts = options(process.argv.slice(2));
  const work = calls(opts.npz);
  const s = await openSuitePage({ '/dist/': process.env.WEBPTE_DIST ?? join(ROOT, 'dist'), '/suite/': join(ROOT, 'tests/browser'), '/prog/': dirname(opts.pte) });
  let failed = false;
  try {
    await s.page.evaluate(() => suite.webpte.runtimeInfo?.()); // the worker starts: its heap is polled
    const poller = await heapPoller(s.page);
    const browserMemory = pssPoller();
    const loaded = await s.page.evaluate(async ([src, limits, chunkBytes]) => {
      const t0 = performance.now();
      window.program = await suite.webpte.loadProgram(src, { limits, chunkBytes: chunkBytes ?? undefined });
      return performance.now() - t0;
    }, [`/prog/${basename(opts.pte)}`, opts.limits, opts.chunkBytes ?? null]);
    const peakHeap = await poller.stop();
    const peakPss = browserMemory.stop();
    const result = await s.page.evaluate(async ([load_ms, todo]) => {
      const { program } = window;
      const out = [];
      for (const call of todo) {
        const inputs = call.inputs.map((x) => {
          const raw = Uint8Array.from(atob(x.b64), (c) => c.charCodeAt(0));
          const C = { float32: Float32Array, int64: BigInt64Array, int32: Int32Array, int8: Int8Array, uint8: Uint8Array, bool: Uint8Array }[x.dtype];
          return new C(raw.buffer);
        });
        const t = performance.now();
        const outputs = await program.run(inputs);
        out.push({ ms: performance.now() - t, outputs: outputs.map((o) => ({ shape: null, data: Array.from(o, Number) })) });
      }
      const info = await suite.webpte.runtimeInfo?.();
      const stats = program.stats;
      const shapes = program.outputs.map((o) => o.shape);
      await program.dispose();
      return { load_ms, stats, shapes, calls: out, heap: info?.memory ?? null };
    }, [loaded, work.map((c) => ({ inputs: c.inputs }))]);
    const st = result.stats;
    const s_ = (ms) => ((ms ?? 0) / 1e3).toFixed(1);
    // Streamed: fetch_ms is the preflight (Python boot + planning from Range reads); the body
    // streams into the GPU buffers inside the upload (buffers_ms).
    console.log(`loaded ${basename(opts.pte)} in the page in ${s_(result.load_ms)} s: `
      + `${st.streamed ? 'preflight' : 'fetch'} ${s_(st.fetch_ms)}, Python boot ${s_(st.python_boot_ms)}, plan ${s_(st.plan_total_ms)}, `
      + `upload ${s_(st.upload_ms)} (${st.streamed ? 'streamed fetch + writes' : 'buffers + writes'} ${s_(st.buffers_ms)}, `
      + `pipelines ${s_(st.pipelines_ms)}); `
      + `${st.dispatches} dispatches, ${st.kernels} kernels, device binding limit ${st.device_binding_limit}`);
    result.calls.forEach((c, i) => {
      const errs = c.outputs.map((o, j) => {
        const ref = work[i].refs[j];
        if (!ref) { failed = true; return `output ${j}: no reference`; }
        const want = ref.shape.join('x');
        const got = (result.shapes[j] ?? []).join('x');
        if (want !== got) { failed = true; return `output ${j}: shape ${got}, reference ${want}`; }
        const e = relL2(c.outputs[j].data, typed(ref));
        if (opts.tolerance != null && !(e <= opts.tolerance)) failed = true;
        if (ref.dtype !== 'float32' || (ref.shape.at(-1) ?? 0) < 2) return `output ${j}: rel-L2 ${e.toExponential(2)}`;
        const { differ, rows } = argmaxDiffers(c.outputs[j].data, typed(ref), ref.shape);
        if (opts.argmax && differ) failed = true;
        return `output ${j}: rel-L2 ${e.toExponential(2)}, ${differ ? `argmax differs in ${differ} of ${rows} rows` : 'argmax the same'}`;
      });
      console.log(`call ${i}: ${c.ms.toFixed(1)} ms, ${errs.join(', ')}`);
    });
    const mb = (n) => (n == null ? '?' : `${(n / 2 ** 20).toFixed(1)} MiB`);
    console.log(`worker memory: peak JS heap (with ArrayBuffers) during the load ${mb(peakHeap)}, wasm heap ${mb(result.heap?.wasmHeapBytes)}, `
      + `constants held at once ${mb(st.largest_held ?? null)} (${st.streamed ? `streamed: largest chunk ${mb(st.largest_chunk)}, `
        + `largest whole-tensor piece ${mb(st.largest_piece)}` : 'the whole file'})`);
    console.log(`browser memory: peak Pss of Chromium's processes during the load ${mb(peakPss.total)} (`
      + `${Object.entries(peakPss.byType).map(([t, n]) => `${t} ${mb(n)}`).join(', ')})`);
  } finally {
    await s.close();
  }
  process.exit(failed ? 1 : 0);
}

main().catch((err) => { console.error(err); process.exit(2); });
