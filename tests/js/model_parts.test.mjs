// The worker's model pieces that need no GPU: int8 embeddings with per-row scales, image rows
// spliced over <image> tokens, pixel normalisation, and the protocol's cancel for generation.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EmbeddingTable, PromptRows } from '../../web/embeddings.js';
import { pixelValues } from '../../web/image.js';
import { Client, REQUESTS, serve } from '../../web/protocol.js';
import { InputError, ModelFolderError } from '../../web/errors.js';

// vocab 5, hidden 3: row r = [r, -r, 2r] * scale r
const TABLE = Int8Array.from([0, 0, 0, 1, -1, 2, 2, -2, 4, 3, -3, 6, 127, -128, 1]);
const SCALES = Float32Array.from([1, 0.5, 0.25, 2, 0.125]);
const table = (options) => new EmbeddingTable(new Blob([TABLE]), SCALES.slice().buffer, 3, options);

test('an embedding is the int8 row times its scale; ids outside the table are InputErrors', async () => {
  const t = table();
  const out = new Float32Array(6).fill(NaN);
  const rows = await t.rows([3, 4]);
  t.write(3, out, 0, rows);
  t.write(4, out, 3, rows);
  assert.deepEqual(Array.from(out), [6, -6, 12, 127 * 0.125, -128 * 0.125, 0.125]);
  await assert.rejects(t.rows([5]), InputError);
  await assert.rejects(t.rows([1.5]), InputError);
  assert.throws(() => t.write(5, out, 0, rows), InputError);
  assert.throws(() => t.write(1, out, 0, rows), /not read first/);
  assert.throws(() => new EmbeddingTable(new Blob([new ArrayBuffer(14)]), SCALES.buffer, 3), ModelFolderError);
  assert.throws(() => new EmbeddingTable(new Blob([TABLE]), new ArrayBuffer(8), 3), /2 values for 5 table rows/);
});

test('the table is read by rows: only recently used ones are kept, at least one window\'s', async () => {
  const t = table({ cacheBytes: 6 }); // two 3-byte rows
  await t.rows([1, 2]);
  await t.rows([3]);
  assert.deepEqual([...t.cache.keys()], [2, 3], 'the least recently used row went');
  const rows = await t.rows([0, 1, 4]); // a window of more rows than are kept keeps them all
  assert.deepEqual([...rows.keys()].sort(), [0, 1, 4]);
  assert.equal(t.cache.size, 3);
  assert.equal(t.peakHeldBytes, 5 * 3, 'two kept rows and three being read');
});

test('windows read the rows of their positions; <image> rows come from the images in order', async () => {
  const IMG = 4;
  const imageA = Float32Array.from([10, 11, 12, 20, 21, 22]); // 2 rows
  const imageB = Float32Array.from([30, 31, 32]); // 1 row
  const ids = [1, IMG, IMG, 2, IMG, 3];
  const rows = new PromptRows(table(), ids, [imageA, imageB], IMG);
  assert.deepEqual(Array.from(await rows.window(0, 4)), [0.5, -0.5, 1, 10, 11, 12, 20, 21, 22, 0.5, -0.5, 1]);
  rows.push(IMG); // a generated token is a plain token
  assert.deepEqual(Array.from(await rows.window(3, 4)), [0.5, -0.5, 1, 30, 31, 32, 6, -6, 12, 127 * 0.125, -128 * 0.125, 0.125]);
  await assert.rejects(rows.window(5, 3), InputError, 'a position past the prompt');
  assert.throws(() => new PromptRows(table(), ids, [imageA], IMG), /3 <image> tokens in the prompt but 2 image embedding rows/);
  assert.doesNotThrow(() => new PromptRows(table(), [1, IMG], [], null), 'a model without <image>');
});

test('pixel values: (x/255 - 0.5)/0.5, NCHW, alpha dropped', () => {
  const rgba = Uint8Array.from([255, 0, 51, 7, 0, 255, 102, 200]); // 1x2
  const px = pixelValues(rgba, 1, 2);
  const f = (x) => Math.fround((x / 255 - 0.5) / 0.5);
  assert.deepEqual(Array.from(px), [1, -1, -1, 1, f(51), f(102)]);
  assert.throws(() => pixelValues(rgba, 2, 2), InputError);
});

test('cancel aborts the signal of a running request, out of the queue; other requests still wait', async (t) => {
  assert.ok(REQUESTS.includes('cancel') && REQUESTS.includes('generate'));
  const { port1, port2 } = new MessageChannel();
  const log = [];
  serve(port2, {
    async generate(_, emit, signal) {
      let n = 0;
      while (!signal.aborted) {
        emit({ type: 'text', text: `t${n++}` });
        await new Promise((r) => setTimeout(r, 5));
      }
      log.push('stopped');
      return { stopReason: 'aborted', n };
    },
    async info() { log.push('info'); return 1; },
  });
  const client = new Client(port1);
  t.after(() => { port1.close(); port2.close(); });
  const stop = new AbortController();
  const events = [];
  const done = client.request('generate', {}, { signal: stop.signal, onEvent: (e) => { events.push(e); if (events.length === 3) stop.abort(); } });
  const info = client.request('info', null);
  const out = await done;
  assert.equal(out.stopReason, 'aborted');
  assert.ok(out.n >= 3);
  assert.equal(await info, 1);
  assert.deepEqual(log, ['stopped', 'info'], 'info waited for generate; cancel did not');
  // A signal aborted before the request is sent cancels it right after it starts.
  const early = new AbortController();
  early.abort();
  const quick = await client.request('generate', {}, { signal: early.signal });
  assert.ok(quick.n <= 1, `ran ${quick.n} steps`);
});

test('checkCapabilities says what is missing before any download', async () => {
  const { checkCapabilities } = await import('../../web/model.js');
  const none = await checkCapabilities({ gpu: undefined });
  assert.equal(none.webgpu, false);
  assert.ok(none.problems.some((p) => /no WebGPU/.test(p)), JSON.stringify(none.problems));
  assert.ok(none.problems.some((p) => /no Web Workers/.test(p)), 'node has no Worker global');
  const noAdapter = await checkCapabilities({ gpu: { requestAdapter: async () => null, wgslLanguageFeatures: new Set(['x']) } });
  assert.ok(noAdapter.problems.some((p) => /gave no adapter/.test(p)));
  assert.deepEqual(noAdapter.wgslFeatures, ['x']);
  const adapter = {
    info: { vendor: 'v', architecture: 'a', device: '', description: 'd', isFallbackAdapter: true },
    limits: { maxBufferSize: 1 << 30, maxStorageBuffersPerShaderStage: 10 },
    features: new Set(['shader-f16']),
  };
  const ok = await checkCapabilities({ gpu: { requestAdapter: async () => adapter, wgslLanguageFeatures: new Set() } });
  assert.equal(ok.webgpu, true);
  assert.deepEqual(ok.adapter, { vendor: 'v', architecture: 'a', device: '', description: 'd', isFallbackAdapter: true });
  assert.deepEqual(ok.limits, { maxBufferSize: 1 << 30, maxStorageBuffersPerShaderStage: 10 });
  assert.deepEqual(ok.features, ['shader-f16']);
  assert.ok(ok.warnings.some((w) => /software fallback/.test(w)));
});
