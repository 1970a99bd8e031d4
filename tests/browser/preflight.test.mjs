// Tier 2, preflight: before any weight byte is downloaded the worker reads only a program's
// flatbuffer regions with HTTP Range requests (demo/serve.mjs answers 206), plans it in
// Python and checks what the plan needs against the device. A plan above a limit (lowered
// with the `limits` option, as a small adapter would have it) is an AdapterLimitsError naming
// the limit, the need and the allowance, and the server's log shows only Range requests of
// the program and no request for the model's other files; a model that fits still loads.
// Needs `npm run build` (dist/).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSuitePage } from './browser.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const TINY_VLM = join(ROOT, 'tests/fixtures/tiny_vlm');
const GEMMA = join(ROOT, 'tests/fixtures/gemma4');
const DECODER = '/tiny-vlm/decoder_q8.pte';
const GEMMA_PTE = '/gemma4/gemma4_delegated.pte';
const LONG = { timeout: 300_000 };
assert.ok(existsSync(join(ROOT, 'dist/index.js')), 'dist/ is missing: run `npm run build` first');

let s;
before(async () => {
  s = await openSuitePage({
    '/dist/': join(ROOT, 'dist'), '/suite/': join(ROOT, 'tests/browser'), '/tiny-vlm/': TINY_VLM, '/gemma4/': GEMMA,
  });
});
after(async () => { await s?.close(); });

/** Requests of `path` since `mark` (a copy of the ranges log): [{range, bytes}], and whether every one was a Range request. */
function requestsOf(path, size, mark) {
  const ranges = s.server.ranges.slice(mark).filter((r) => r.startsWith(`${path} `)).map((r) => r.slice(path.length + 1));
  const bytes = ranges.map((r) => {
    const m = /^bytes=(\d+)-(\d+)$/.exec(r);
    assert.ok(m, `a bounded range, not ${r}`);
    return Math.min(Number(m[2]), size - 1) - Number(m[1]) + 1;
  });
  return { ranges, fetched: bytes.reduce((a, b) => a + b, 0) };
}

/** Run `fn`'s promise in the page; its error as data with the limit fields. */
const caught = (body, arg) => s.page.evaluate(async ([src, a]) => {
  try {
    const out = await new Function('webpte', 'arg', `return (async () => { ${src} })()`)(suite.webpte, a);
    return { ok: out ?? true };
  } catch (err) {
    return {
      error: { name: err.name, message: err.message, limit: err.limit, needed: err.needed, allowed: err.allowed,
        isLimits: err instanceof suite.webpte.AdapterLimitsError, isAdapter: err instanceof suite.webpte.AdapterError },
    };
  }
}, [body, arg]);

describe('preflight: refused before the weights are downloaded', () => {
  test('a model whose plan needs more than a (lowered) limit: AdapterLimitsError, only flatbuffer ranges fetched', LONG, async () => {
    const size = statSync(join(TINY_VLM, 'decoder_q8.pte')).size;
    const mark = s.server.ranges.length;
    const hitsBefore = new Map(s.server.hits);
    const out = await caught(`await webpte.loadModel('/tiny-vlm/', { cache: false, limits: { maxStorageBufferBindingSize: 16384 } });`);
    assert.ok(out.error, 'the load was refused');
    assert.equal(out.error.name, 'AdapterLimitsError', out.error.message);
    assert.ok(out.error.isLimits && out.error.isAdapter, 'typed: AdapterLimitsError, an AdapterError');
    assert.equal(out.error.limit, 'maxStorageBufferBindingSize');
    assert.equal(out.error.allowed, 16384);
    assert.ok(out.error.needed > 16384, `needed ${out.error.needed}`);
    assert.match(out.error.message, /maxStorageBufferBindingSize = \d+, this device allows 16384; refused before downloading/);
    const { ranges, fetched } = requestsOf(DECODER, size, mark);
    const hits = (p) => (s.server.hits.get(p) ?? 0) - (hitsBefore.get(p) ?? 0);
    assert.equal(hits(DECODER), ranges.length, `every request of the decoder was a Range request: ${ranges.join(', ')}`);
    assert.ok(ranges.length >= 1 && ranges.length <= 8, ranges.join(', '));
    // the tiny decoder's flatbuffers are a third of it (random weights are small); the
    // SmolLM2 figures are in the report: 1.07 MB of 138 MB read by Python
    assert.ok(fetched < 0.45 * size, `fetched ${fetched} of ${size} bytes`);
    for (const file of ['embed_tokens.i8.bin', 'embed_tokens.scale.f32.bin', 'tokenizer/tokenizer.json', 'vision_q8.pte']) {
      assert.equal(hits(`/tiny-vlm/${file}`), 0, `${file} was not requested`);
    }
    console.log(`preflight (tiny VLM decoder): ${ranges.length} Range requests, ${fetched} of ${size} bytes`);
  });

  test('loadProgram(URL) checks workgroup memory and a device-memory budget before the fetch', LONG, async () => {
    const size = statSync(join(GEMMA, 'gemma4_delegated.pte')).size;
    const mark = s.server.ranges.length;
    const before = s.server.hits.get(GEMMA_PTE) ?? 0;
    // (its tiled matmuls stage 2560 bytes of workgroup memory)
    const wg = await caught('await webpte.loadProgram(arg, { limits: { maxComputeWorkgroupStorageSize: 1024 } });', GEMMA_PTE);
    assert.equal(wg.error?.name, 'AdapterLimitsError', JSON.stringify(wg));
    assert.equal(wg.error.limit, 'maxComputeWorkgroupStorageSize');
    assert.equal(wg.error.allowed, 1024);
    assert.ok(wg.error.needed > 1024 && wg.error.needed <= 16384, `needed ${wg.error.needed}`);
    const mem = await caught('await webpte.loadProgram(arg, { limits: { deviceMemory: 1e6 } });', GEMMA_PTE);
    assert.equal(mem.error?.limit, 'deviceMemory', JSON.stringify(mem));
    assert.ok(mem.error.needed > 1e6 && mem.error.allowed === 1e6);
    assert.match(mem.error.message, /bytes of device memory, the budget is 1000000/);
    const { ranges, fetched } = requestsOf(GEMMA_PTE, size, mark);
    assert.equal((s.server.hits.get(GEMMA_PTE) ?? 0) - before, ranges.length, 'no full GET of the program');
    assert.ok(fetched < 0.25 * size, `fetched ${fetched} of ${size} bytes over two refusals`);
    console.log(`preflight (gemma4_delegated, twice): ${ranges.length} Range requests, ${fetched} of ${size} bytes`);
  });

  test('a model that fits still loads, and says what the preflight read', LONG, async () => {
    const model = await caught(`const m = await webpte.loadModel('/tiny-vlm/', { cache: false });
      const st = m.stats.preflight; await m.dispose(); return { st };`);
    assert.ok(model.ok, JSON.stringify(model.error));
    const { decoder } = model.ok.st;
    assert.equal(decoder.skipped, undefined, decoder.skipped);
    assert.ok(decoder.bytes_read > 0 && decoder.bytes_read <= decoder.fetched, JSON.stringify(decoder));
    assert.ok(model.ok.st.vision.needs.device_memory > 0);
    assert.deepEqual(s.blocked, []);
  });
});
