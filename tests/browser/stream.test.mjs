// Tier 2, streamed loading: a program by URL is planned from its Range reads and its body
// streams into the GPU buffers; the outputs are bitwise those of the same program given as an
// ArrayBuffer (whole-file path), as a Blob and from a server without byte ranges; the loader held no more than two chunks of
// `chunkBytes` and the largest tensor it converts; a body that differs from what the plan was read from, or is cut and cannot resume,
// is an InputError. A model folder's programs stream too: from the network (planned by the
// preflight, written to the cache as they pass, checked against their pinned sha256) and
// then from the cache, with the same answers; a program file that fails its hash is a
// HashMismatchError and is not cached. Needs `npm run build` (dist/).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSuitePage } from './browser.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const FIXTURE = 'decoder_q8_tiny.pte';
const LONG = { timeout: 300_000 };
const CHUNK = 16 << 10; // loadProgram's chunkBytes: the file is read in 16 KiB Range requests / slices

assert.ok(existsSync(join(ROOT, 'dist/index.js')), 'dist/ is missing: run `npm run build` first');
const SIZE = readFileSync(join(ROOT, 'tests/fixtures', FIXTURE)).length;
const TINY_VLM = join(ROOT, 'tests/fixtures/tiny_vlm');
const DECODER = readFileSync(join(TINY_VLM, 'decoder_q8.pte'));
const PINNED = JSON.parse(readFileSync(join(TINY_VLM, 'webpte_model.json'), 'utf8')).sha256['decoder_q8.pte'];

let s;
before(async () => {
  s = await openSuitePage({ '/dist/': join(ROOT, 'dist'), '/suite/': join(ROOT, 'tests/browser'), '/fixtures/': join(ROOT, 'tests/fixtures'),
    '/tiny-vlm/': TINY_VLM, '/tiny-bad/': TINY_VLM });
});
after(async () => { await s?.close(); });

/** Load `how` ('url' | 'bytes' | 'blob' | a URL), run two calls with seeded inputs: outputs as numbers, stats; or the error. */
function loadAndRun(how) {
  return s.page.evaluate(async ([how, url, CHUNK]) => {
    const { webpte } = suite;
    const src = how === 'url' ? url : how === 'bytes' ? await (await fetch(url)).arrayBuffer()
      : how === 'blob' ? await (await fetch(url)).blob() : how;
    let program;
    try {
      program = await webpte.loadProgram(src, { poison: true, chunkBytes: CHUNK });
      const outs = [];
      for (const pos of [0, 4]) {
        const inputs = program.inputs.map((io) => {
          const n = io.shape.reduce((a, b) => a * b, 1);
          if (io.dtype === 'int64') return new BigInt64Array(n).fill(BigInt(pos));
          return Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37 + pos));
        });
        outs.push((await program.run(inputs)).map((o) => Array.from(o, Number)));
      }
      return { outs, stats: program.stats };
    } catch (err) {
      return { error: { name: err.name, message: err.message, isInput: err instanceof webpte.InputError } };
    } finally {
      await program?.dispose();
    }
  }, [how, `/fixtures/${FIXTURE}`, CHUNK]);
}

describe('streamed loading', () => {
  let whole;
  before(async () => { whole = await loadAndRun('bytes'); });

  test('a URL streams into the GPU buffers: outputs bitwise those of the ArrayBuffer, chunks held far below the file', LONG, async () => {
    assert.equal(whole.error, undefined, JSON.stringify(whole.error));
    assert.equal(whole.stats.streamed, false);
    assert.equal(whole.stats.largest_held, SIZE);
    const got = await loadAndRun('url');
    assert.equal(got.error, undefined, JSON.stringify(got.error));
    assert.equal(got.stats.streamed, true);
    assert.ok(got.stats.preflight?.reads >= 1, 'planned from Range reads');
    const { largest_held: held, largest_chunk: chunk, largest_piece: piece } = got.stats;
    // a chunk being written, the one read ahead, and the largest tensor held whole to convert
    assert.equal(chunk, CHUNK);
    assert.ok(held <= 2 * CHUNK + piece && held < SIZE / 2, `held ${held} of ${SIZE} bytes at once (chunks ${chunk}, pieces ${piece})`);
    assert.deepEqual(got.outs, whole.outs);
  });

  test('a Blob is read in slices: outputs bitwise those of the ArrayBuffer', LONG, async () => {
    const got = await loadAndRun('blob');
    assert.equal(got.error, undefined, JSON.stringify(got.error));
    assert.equal(got.stats.streamed, true);
    assert.deepEqual(got.outs, whole.outs);
  });

  test('a server without byte ranges: the body is kept as a Blob, planned from and streamed; outputs bitwise the same', LONG, async () => {
    const bytes = readFileSync(join(ROOT, 'tests/fixtures', FIXTURE));
    await s.page.context().route('**/norange/*.pte', (route) => route.fulfill({ status: 200, body: bytes }));
    const got = await loadAndRun('/norange/prog.pte');
    assert.equal(got.error, undefined, JSON.stringify(got.error));
    assert.match(got.stats.preflight?.skipped ?? '', /does not serve byte ranges/);
    assert.equal(got.stats.streamed, true);
    assert.deepEqual(got.outs, whole.outs);
  });

  test('a chunk that is not the file the plan was read from, or one that keeps coming back short, is an InputError', LONG, async () => {
    const bytes = readFileSync(join(ROOT, 'tests/fixtures', FIXTURE));
    const flipped = Buffer.from(bytes);
    flipped[40] ^= 0xff; // inside the program flatbuffer the plan was read from
    // The preflight's Range reads get the file; the upload's chunk reads (CHUNK bytes from 0,
    // or any past 2 * CHUNK) get `answer(a, b)`.
    const serve = (path, answer) => s.page.context().route(`**/changed/${path}`, async (route) => {
      const [, a, b] = (/bytes=(\d+)-(\d+)/.exec(route.request().headers().range ?? '') ?? []).map(Number);
      if (a === undefined) return route.fulfill({ status: 200, body: bytes });
      const stream = (a === 0 && b === CHUNK - 1) || a >= 2 * CHUNK;
      const body = stream ? answer(a, b + 1) : bytes.subarray(a, b + 1);
      return route.fulfill({ status: 206, body, headers: { 'content-range': `bytes ${a}-${b}/${SIZE}` } });
    });
    await serve('flipped.pte', (a, b) => flipped.subarray(a, b));
    const changed = await loadAndRun('/changed/flipped.pte');
    assert.equal(changed.error?.name, 'InputError', JSON.stringify(changed.error ?? changed.stats));
    assert.match(changed.error.message, /changed on the server after its plan was read \(byte 40 differs\)/);
    await serve('short.pte', (a, b) => bytes.subarray(a, b - 100));
    const short = await loadAndRun('/changed/short.pte');
    assert.equal(short.error?.name, 'InputError', JSON.stringify(short.error ?? short.stats));
    assert.match(short.error.message, /could not be read in 4 requests .*the download was cut, retry/);
  });
});

describe('streamed model folders', () => {
  /** Load the folder at `base` (chunks of CHUNK bytes), answer one prompt greedily: ids, stats, what the cache holds of the decoder. */
  const answer = (base) => s.page.evaluate(async ([base, CHUNK]) => {
    const err = await suite.errorOf((async () => {
      window.tiny = await suite.webpte.loadModel(base, { chunkBytes: CHUNK });
    })());
    const cache = await caches.open('webpte-models-v1');
    const hit = await cache.match(new URL(`${base}decoder_q8.pte`, location.href).href);
    const cached = hit ? Array.from(new Uint8Array(await hit.arrayBuffer())) : null;
    if (err) return { err, cached };
    let done = null;
    for await (const ev of window.tiny.generate({ prompt: 'Hello there', maxNewTokens: 6 })) if (ev.type === 'done') done = ev;
    const { stats } = window.tiny;
    await window.tiny.dispose();
    return { ids: done.tokenIds, stats, cached };
  }, [base, CHUNK]);

  test('from the network (preflight plan, cached as it passes) and then from the cache: the same answer, chunks held', LONG, async () => {
    const first = await answer('/tiny-vlm/');
    assert.equal(first.err, undefined, JSON.stringify(first.err));
    const dec = first.stats.decoder;
    assert.ok(dec.streamed && first.stats.preflight?.decoder?.reads >= 1, JSON.stringify(first.stats.preflight));
    assert.ok(dec.largest_held <= 2 * CHUNK + dec.largest_piece && dec.largest_held < DECODER.length / 2,
      `held ${dec.largest_held} of ${DECODER.length} bytes (pieces ${dec.largest_piece})`);
    assert.equal(createHash('sha256').update(Uint8Array.from(first.cached)).digest('hex'), PINNED, 'the verified decoder was cached');
    const again = await answer('/tiny-vlm/');
    assert.equal(again.err, undefined, JSON.stringify(again.err));
    assert.ok(again.stats.preflight?.decoder?.skipped, 'cached: nothing to preflight');
    assert.equal(again.stats.decoder.largest_chunk, CHUNK, 'read from the cache in chunks');
    assert.deepEqual(again.ids, first.ids);
  });

  test('a program file that fails its pinned sha256 is a HashMismatchError and is not cached', LONG, async () => {
    const bad = Buffer.from(DECODER);
    bad[bad.length - 5] ^= 0x5a; // past the flatbuffer: the plan holds, the hash does not
    await s.page.context().route('**/tiny-bad/decoder_q8.pte', async (route) => {
      const [, a, b] = (/bytes=(\d+)-(\d+)/.exec(route.request().headers().range ?? '') ?? []).map(Number);
      if (a === undefined) return route.fulfill({ status: 200, body: bad });
      return route.fulfill({ status: 206, body: bad.subarray(a, b + 1), headers: { 'content-range': `bytes ${a}-${b}/${bad.length}` } });
    });
    const out = await answer('/tiny-bad/');
    assert.equal(out.err?.name, 'HashMismatchError', JSON.stringify(out.err));
    assert.match(out.err.message, /decoder_q8\.pte does not match its pinned sha256/);
    assert.equal(out.cached, null, 'nothing of the corrupt file is kept');
    const info = await s.page.evaluate(() => suite.webpte.runtimeInfo());
    assert.equal(info.models, 0);
  });
});
