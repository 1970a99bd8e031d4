// The page <-> worker protocol over a real MessageChannel: returns, typed throws, events,
// transfers, ordering, malformed messages and a failed worker.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client, Transfer, checkMessage, serve, REQUESTS, REPLIES } from '../../web/protocol.js';
import {
  DisposedError, InputError, PteFormatError, UnsupportedOpError, WebpteError, WorkerError,
} from '../../web/errors.js';

function pair(handlers) {
  const { port1, port2 } = new MessageChannel();
  serve(port2, handlers);
  const client = new Client(port1);
  return { client, close: () => { port1.close(); port2.close(); } };
}

test('a request is answered by return with its content', async () => {
  const { client, close } = pair({ info: async (c) => ({ echo: c }) });
  assert.deepEqual(await client.request('info', { a: 1 }), { echo: { a: 1 } });
  close();
});

test('a throw arrives as the typed error of the same name', async () => {
  const { client, close } = pair({
    load: () => { throw new UnsupportedOpError('no kernel for aten.foo', ['aten.foo']); },
    run: () => { throw new InputError('input 0 has shape [2], the method takes float32[3]'); },
    reset: () => { throw new TypeError('plain'); },
  });
  const e1 = await client.request('load', {}).catch((e) => e);
  assert.ok(e1 instanceof UnsupportedOpError && e1 instanceof WebpteError);
  assert.deepEqual(e1.ops, ['aten.foo']);
  const e2 = await client.request('run', {}).catch((e) => e);
  assert.ok(e2 instanceof InputError);
  assert.match(e2.message, /method takes float32\[3\]/);
  const e3 = await client.request('reset', {}).catch((e) => e);
  assert.ok(!(e3 instanceof WebpteError));
  assert.equal(e3.name, 'TypeError');
  close();
});

test('stream events reach the request that emitted them, before its return', async () => {
  const { client, close } = pair({
    load: async (_, emit) => { emit({ stage: 'fetch', loaded: 1 }); emit({ stage: 'ready' }); return 7; },
  });
  const seen = [];
  const out = await client.request('load', null, { onEvent: (e) => seen.push(e.stage) });
  assert.equal(out, 7);
  assert.deepEqual(seen, ['fetch', 'ready']);
  close();
});

test('requests are served one at a time in order', async () => {
  const log = [];
  const { client, close } = pair({
    load: async () => { log.push('load start'); await new Promise((r) => setTimeout(r, 30)); log.push('load end'); },
    run: async () => { log.push('run'); },
  });
  await Promise.all([client.request('load', null), client.request('run', null)]);
  assert.deepEqual(log, ['load start', 'load end', 'run']);
  close();
});

test('Transfer moves buffers instead of copying them', async () => {
  const sent = new Float32Array([1, 2, 3]);
  const { client, close } = pair({ run: () => new Transfer([sent], [sent.buffer]) });
  const [got] = await client.request('run', null);
  assert.deepEqual(Array.from(got), [1, 2, 3]);
  assert.equal(sent.byteLength, 0, 'the worker-side buffer is detached after transfer');
  close();
});

test('unknown kinds and ids are refused on both sides', async () => {
  assert.throws(() => checkMessage({ kind: 'nope', id: 0 }, REQUESTS), /unknown message kind/);
  assert.throws(() => checkMessage({ kind: 'run', id: -1 }, REQUESTS), /non-negative integer/);
  assert.throws(() => checkMessage(null, REPLIES), /not an object/);
  const { client, close } = pair({});
  await assert.rejects(client.request('nope', null), /unknown message kind/);
  await assert.rejects(client.request('info', null), /does not serve info/);
  close();
});

test('a malformed reply or a worker error fails every pending request with WorkerError', async () => {
  const { port1, port2 } = new MessageChannel();
  const client = new Client(port1);
  const pending = client.request('run', null);
  port2.postMessage({ kind: 'bogus', id: 0 });
  const err = await pending.catch((e) => e);
  assert.ok(err instanceof WorkerError);
  await assert.rejects(client.request('run', null), WorkerError);
  port1.close(); port2.close();
});

test('close() rejects pending and later requests with DisposedError', async () => {
  const { port1, port2 } = new MessageChannel();
  const client = new Client(port1);
  const pending = client.request('run', null);
  client.close();
  await assert.rejects(pending, DisposedError);
  await assert.rejects(client.request('run', null), DisposedError);
  port2.close();
});

test('PteFormatError keeps its class across the wire', async () => {
  const { client, close } = pair({ load: () => { throw new PteFormatError('malformed .pte: file identifier'); } });
  await assert.rejects(client.request('load', null), (e) => e instanceof PteFormatError && e.name === 'PteFormatError');
  close();
});
