// Downloads that resume (web/files.js fetchBody against demo/serve.mjs on 127.0.0.1): a body cut
// at half resumes with `Range: bytes=N-` and ends byte-identical; a server that ignores the
// range sends it again from the start; one that keeps cutting gives a typed InputError.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fetchBody } from '../../web/files.js';
import { InputError } from '../../web/errors.js';
import { serveStatic } from '../../demo/serve.mjs';

const body = Buffer.from(Uint8Array.from({ length: 100_003 }, (_, i) => (i * 31 + 7) % 251));

/** A stream of `bytes`, then a network error when `cut`. */
function cutAfter(bytes, cut) {
  let sent = false;
  return new ReadableStream({
    pull(c) {
      if (!sent) { sent = true; c.enqueue(bytes); return; }
      if (cut) c.error(new TypeError('network error')); else c.close();
    },
  });
}

test('a body cut at 50% resumes with a Range request and ends byte-identical', async () => {
  const site = await serveStatic({ files: { '/f.bin': body }, cut: { '/f.bin': 0.5 } });
  try {
    let counted = 0;
    const got = Buffer.from(await fetchBody(`${site.url}/f.bin`, (n) => { counted += n; }));
    assert.ok(got.equals(body));
    assert.equal(counted, body.length, 'each byte counted once');
    assert.deepEqual(site.ranges, [`/f.bin bytes=${Math.floor(body.length / 2)}-`]);
    assert.equal(site.hits.get('/f.bin'), 2);
  } finally {
    await site.close();
  }
});

test('a server that ignores Range sends the file again from the start; progress takes the first bytes back', async () => {
  const real = globalThis.fetch;
  let calls = 0;
  globalThis.fetch = async (url, init) => {
    calls++;
    const half = calls === 1;
    const stream = cutAfter(body.subarray(0, half ? 5000 : body.length), half);
    assert.equal(Boolean(init?.headers?.range), !half);
    return new Response(stream, { headers: { 'content-length': String(body.length) } });
  };
  try {
    let counted = 0;
    const got = Buffer.from(await fetchBody('http://127.0.0.1:9/f.bin', (n) => { counted += n; }));
    assert.ok(got.equals(body));
    assert.equal(counted, body.length);
    assert.equal(calls, 2);
  } finally {
    globalThis.fetch = real;
  }
});

test('a body cut on every request gives up after `attempts` requests with an InputError', async () => {
  const real = globalThis.fetch;
  let calls = 0;
  globalThis.fetch = async (url, init) => {
    const from = Number(/bytes=(\d+)-/.exec(init?.headers?.range ?? '')?.[1] ?? 0);
    calls++;
    const stream = cutAfter(body.subarray(from, from + 10), true);
    const headers = { 'content-length': String(body.length - from) };
    if (from) headers['content-range'] = `bytes ${from}-${body.length - 1}/${body.length}`;
    return new Response(stream, { status: from ? 206 : 200, headers });
  };
  try {
    const err = await fetchBody('http://127.0.0.1:9/f.bin', () => {}, { attempts: 3 }).catch((e) => e);
    assert.ok(err instanceof InputError, String(err));
    assert.match(err.message, /ended after 30 of 100003 bytes \(network error\) in 3 requests; the download was cut, retry/);
    assert.equal(calls, 3);
  } finally {
    globalThis.fetch = real;
  }
});
