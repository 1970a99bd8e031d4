// Tier 2, streamed loading: a program by URL is planned from its Range reads and its body
// streams into the GPU buffers; the outputs are bitwise those of the same program given as an
// ArrayBuffer (whole-file path) and as a Blob; the loader held no more than two chunks of
// `chunkBytes` and the largest tensor it converts; a body that differs from what the plan was read from, or is cut and cannot resume,
// is an InputError. Needs `npm run build` (dist/).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
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

let s;
before(async () => {
  s = await openSuitePage({ '/dist/': join(ROOT, 'dist'), '/suite/': join(ROOT, 'tests/browser'), '/fixtures/': join(ROOT, 'tests/fixtures') });
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
