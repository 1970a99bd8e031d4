// Tier 2, long sessions in the page: decode steps of a windowed decoder (each a window of
// random embeddings at the next position, reset when the context is full, as
// tests/test_soak.py does natively) create no GPU buffer and no bind group after load
// (runtimeInfo().created counts every one made on webpte's devices) and keep the worker's JS
// heap, Pyodide's wasm heap and the browser's RSS flat. The figures are printed.
//
// Env: WEBPTE_SOAK_WEB_STEPS (300 here; `make soak-web` runs 1,000), WEBPTE_SOAK_WEB_MODEL
// (a decoder .pte; `make soak-web` passes the SmolLM2 one when it is built).
// Heaps: the worker's JS heap through the DevTools protocol (Runtime.getHeapUsage on the worker
// target, after HeapProfiler.collectGarbage): Chromium has no performance.memory in workers, and
// measureUserAgentSpecificMemory needs cross-origin isolation, which the suite's server does not
// set. The page's own heap is performance.memory (--enable-precise-memory-info, --expose-gc).
// Needs `npm run build` (dist/).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { CHROMIUM } from './browser.mjs';
import { serveStatic } from './server.mjs';
import { phaseFailures } from './soak_checks.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const MODEL = process.env.WEBPTE_SOAK_WEB_MODEL || join(ROOT, 'tests/fixtures/decoder_q8_tiny.pte');
const STEPS = Number(process.env.WEBPTE_SOAK_WEB_STEPS ?? 300);
const WARM = Math.min(10, STEPS);
assert.ok(existsSync(join(ROOT, 'dist/index.js')), 'dist/ is missing: run `npm run build` first');

/** RSS in MB of every process under `root` (this test's Chromium: browser, renderer, GPU, utility). */
function treeRssMB(root = process.pid) {
  const parent = new Map();
  for (const d of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      parent.set(Number(d), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch { /* the process ended */ }
  }
  const tree = new Set([root]);
  for (let grew = true; grew;) {
    grew = false;
    for (const [pid, ppid] of parent) if (tree.has(ppid) && !tree.has(pid)) { tree.add(pid); grew = true; }
  }
  let pages = 0;
  tree.delete(root);
  for (const pid of tree) {
    try { pages += Number(readFileSync(`/proc/${pid}/statm`, 'utf8').split(' ')[1]); } catch { /* ended */ }
  }
  return (pages * 4096) / 2 ** 20;
}

/** The worker's heap over CDP: `() => Promise<usedSize bytes>` after a garbage collection. */
async function workerHeap(page) {
  const cdp = await page.context().newCDPSession(page);
  const { targetInfos } = await cdp.send('Target.getTargets');
  const worker = targetInfos.find((t) => t.type === 'worker');
  assert.ok(worker, 'the webpte worker is a CDP target');
  const { sessionId } = await cdp.send('Target.attachToTarget', { targetId: worker.targetId, flatten: false });
  const pending = new Map();
  let next = 0;
  cdp.on('Target.receivedMessageFromTarget', (e) => { const m = JSON.parse(e.message); pending.get(m.id)?.(m); });
  const send = (method) => new Promise((ok) => {
    pending.set(++next, ok);
    cdp.send('Target.sendMessageToTarget', { sessionId, message: JSON.stringify({ id: next, method, params: {} }) });
  });
  return async () => {
    await send('HeapProfiler.collectGarbage');
    return (await send('Runtime.getHeapUsage')).result.usedSize;
  };
}

let server;
let browser;
let page;
before(async () => {
  server = await serveStatic({ '/dist/': join(ROOT, 'dist'), '/suite/': join(ROOT, 'tests/browser'), '/soak/': dirname(MODEL) });
  browser = await chromium.launch({
    executablePath: CHROMIUM, headless: true,
    args: ['--enable-unsafe-webgpu', '--no-sandbox', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run', '--disable-dev-shm-usage', '--enable-precise-memory-info', '--js-flags=--expose-gc'],
  });
  page = await browser.newPage();
  page.on('console', (m) => { if (m.type() === 'error') console.error(`[page] ${m.text()}`); });
  await page.goto(`${server.url}/suite/page.html`);
  await page.waitForFunction(() => window.suiteReady === true, null, { timeout: 60_000 });
});
after(async () => { await browser?.close(); await server?.close(); });

describe('soak', () => {
  test(`${STEPS} decode steps of ${basename(MODEL)}: no GPU buffer or bind group made after load, heaps and RSS flat`, { timeout: 3_600_000 }, async () => {
    const step = async (phase) => page.evaluate(async ({ url, from, to, phase }) => {
      const { webpte } = suite;
      if (phase === 'load') {
        const p = await webpte.loadProgram(url);
        const pos = p.inputs.findIndex((s) => s.dtype === 'int64' && s.shape.length === 1);
        const embeds = p.inputs[1 - pos];
        window.soak = { p, pos, rows: embeds.shape[1], embeds, max: p.maxContext, seed: 14 };
        return { inputs: p.inputs.length, max: p.maxContext, rows: embeds.shape[1] };
      }
      const { p, pos, rows, embeds, max } = window.soak;
      const n = embeds.shape.reduce((a, b) => a * b, 1);
      const data = new Float32Array(n);
      let bad = 0;
      for (let i = from; i < to; i++) {
        const start = (i * rows) % (max - rows + 1);
        if (start === 0) await p.reset();
        for (let j = 0; j < n; j++) { window.soak.seed = (window.soak.seed * 1103515245 + 12345) % 2 ** 31; data[j] = window.soak.seed / 2 ** 31 - 0.5; }
        const inputs = [];
        inputs[pos] = new BigInt64Array([BigInt(start)]);
        inputs[1 - pos] = { data, shape: embeds.shape };
        const [logits] = await p.run(inputs);
        for (const x of logits) if (!Number.isFinite(x)) { bad++; break; }
      }
      window.gc?.();
      const info = await webpte.runtimeInfo({ gc: true });
      return { bad, created: info.created, memory: info.memory, pageHeap: performance.memory?.usedJSHeapSize ?? null };
    }, { url: `/soak/${basename(MODEL)}`, ...phase });

    const shape = await step({ phase: 'load' });
    assert.equal(shape.inputs, 2, 'a windowed decoder (embeds, input_pos)');
    const heap = await workerHeap(page);
    const t0 = performance.now();
    const warm = await step({ from: 0, to: WARM });
    const rss0 = treeRssMB();
    const heap0 = await heap();
    // RSS is also taken halfway: Chromium's processes may grow to a plateau once (SmolLM2: ~100 MB
    // within its first 140 steps, the same after 250), so the bound holds for the second half.
    const mid = Math.floor((WARM + STEPS) / 2);
    const middle = await step({ from: WARM, to: mid });
    const rssMid = treeRssMB();
    const end = await step({ from: mid, to: STEPS });
    const rss1 = treeRssMB();
    const heap1 = await heap();
    const secs = (performance.now() - t0) / 1000;
    const mb = (x) => (x == null ? 'n/a' : (x / 2 ** 20).toFixed(2));
    console.log(`soak-web: ${STEPS} steps of ${basename(MODEL)} in ${secs.toFixed(1)} s; created after load `
      + `buffers ${end.created.buffers - warm.created.buffers}, bind groups ${end.created.bindGroups - warm.created.bindGroups} `
      + `(at load: ${warm.created.buffers} / ${warm.created.bindGroups}); worker JS heap ${mb(heap0)} -> `
      + `${mb(heap1)} MB, wasm heap ${mb(warm.memory.wasmHeapBytes)} -> ${mb(end.memory.wasmHeapBytes)} MB, `
      + `page JS heap ${mb(warm.pageHeap)} -> ${mb(end.pageHeap)} MB, browser RSS ${rss0.toFixed(1)} -> ${rssMid.toFixed(1)} (step ${mid}) -> ${rss1.toFixed(1)} MB`);
    assert.ok(warm.created.buffers > 0 && warm.created.bindGroups > 0, 'the counter saw the load make its buffers and bind groups');
    // Every phase: finite logits; after the warm-up no GPU buffer or bind group, no Pyodide heap growth.
    assert.deepEqual(phaseFailures({ warm, [`steps ${WARM}-${mid}`]: middle, [`steps ${mid}-${STEPS}`]: end }), []);
    const steps = STEPS - WARM;
    const heapGrew = heap1 - heap0;
    assert.ok(heapGrew < 2 ** 20 + 2048 * steps, `the worker's JS heap grew ${heapGrew} bytes over ${steps} steps`);
    const late = STEPS - mid;
    assert.ok(rss1 - rssMid < 64 + 0.05 * late, `browser RSS grew ${(rss1 - rssMid).toFixed(1)} MB over the last ${late} steps`);
  });
});
