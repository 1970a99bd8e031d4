// Streamed constants (web/upload.js): the bytes a buffer gets from chunks fed in file order,
// of any size, are those of the whole-file path (convertInit of the init's bytes); every
// write is 4-byte aligned; the loader holds at most a chunk plus a whole-tensor piece.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HeldMeter, StreamedUpload, convertInit } from '../../web/upload.js';
import { BlobFile, BytesFile } from '../../web/sources.js';
import { InputError } from '../../web/errors.js';

/** A device whose queue writes into host arrays, refusing writes WebGPU would refuse. */
function fakeDevice() {
  return {
    queue: {
      writeBuffer(target, offset, data, dataOffset = 0, size = data.byteLength - dataOffset) {
        assert.equal(offset % 4, 0, `writeBuffer at ${offset}`);
        assert.equal(size % 4, 0, `writeBuffer of ${size} bytes`);
        assert.ok(offset + size <= target.bytes.byteLength, `writeBuffer past the end (${offset}+${size})`);
        target.bytes.set(new Uint8Array(data.buffer, data.byteOffset + dataOffset, size), offset);
        target.writes += 1;
      },
      onSubmittedWorkDone: async () => {},
    },
  };
}

function seeded(seed) {
  let s = seed >>> 0;
  return () => { s = (s * 1664525 + 1013904223) >>> 0; return s / 2 ** 32; };
}

/** Buffers of every init kind over a file of `n` random bytes (int64 ranges hold small values). */
function fixture(rand, n) {
  const file = new Uint8Array(n).map(() => Math.floor(rand() * 256));
  const i64At = 104; // 6 int64 values in int32 range
  for (let i = 0; i < 6; i++) new DataView(file.buffer).setBigInt64(i64At + 8 * i, BigInt(Math.floor(rand() * 2e9) - 1e9), true);
  const inits = [
    { kind: 'file', offset: 0, nbytes: 100, convert: null },
    { kind: 'file', offset: 3, nbytes: 97, convert: null }, // unaligned in the file, a ragged end
    { kind: 'file', offset: i64At, nbytes: 48, convert: 'i64_to_i32' },
    { kind: 'file', offset: 200, nbytes: 37, convert: 'u8_to_u32' },
    { kind: 'file_parts', parts: [{ offset: 300, nbytes: 64 }, { offset: 1000, nbytes: 128 }, { offset: 301, nbytes: 16 }] },
    { kind: 'file_parts', parts: [{ offset: 500, nbytes: 6 }, { offset: 700, nbytes: 10 }] }, // the second part at byte 6
    { kind: 'file_parts', parts: [{ offset: 1200, nbytes: 5 * 32 }, { offset: 2000, nbytes: 5 * 32 }],
      interleave: { row_bytes: 32, rows: 5, segments: 2, group: 4 } },
    { kind: 'file', offset: 1500, nbytes: n - 1500, convert: null }, // to the end of the file
    { kind: 'file', offset: 10, nbytes: 200, convert: null }, // overlaps others
  ];
  return { file, inits };
}

function expected(file, init) {
  const parts = init.kind === 'file' ? [init] : init.parts;
  const src = new Uint8Array(parts.reduce((a, p) => a + p.nbytes, 0));
  let at = 0;
  for (const p of parts) { src.set(file.subarray(p.offset, p.offset + p.nbytes), at); at += p.nbytes; }
  return convertInit(init, src, 'x');
}

for (const chunk of [1, 3, 4, 7, 64, 1001, 1 << 20]) {
  test(`chunks of ${chunk} bytes write the whole-file path's bytes, aligned`, async () => {
    const rand = seeded(chunk);
    const { file, inits } = fixture(rand, 4099);
    const want = inits.map((init) => expected(file, init));
    const targets = want.map((w) => ({ bytes: new Uint8Array(w.byteLength).fill(0xee), writes: 0 }));
    const planBuffers = inits.map((init, id) => ({ id, size: want[id].byteLength, init }));
    const meter = new HeldMeter();
    const up = new StreamedUpload(fakeDevice(), targets, planBuffers, new Set([0]), meter);
    for (let at = 0; at < file.length; at += chunk) {
      const bytes = file.slice(at, at + chunk); // a fresh array, as the network gives
      meter.hold(bytes.byteLength);
      await up.feed(0, at, bytes);
      meter.release(bytes.byteLength);
    }
    up.finish(0, 'the file');
    targets.forEach((t, i) => assert.deepEqual(t.bytes, want[i], `buffer ${i} (${JSON.stringify(inits[i])})`));
    // held: a chunk, plus the largest piece needing its whole tensor and its converted copy
    const piece = Math.max(...inits.map((init, i) => (init.convert || init.interleave || i === 5
      ? expected(file, init).byteLength + want[i].byteLength + 8 : 0)));
    assert.ok(meter.peak <= chunk + piece && meter.chunk <= chunk, `held ${meter.peak} bytes, bound ${chunk + piece}`);
    assert.equal(meter.now, 0);
  });
}

test('a file that ends early is an InputError naming the constants it lacks', async () => {
  const { file, inits } = fixture(seeded(5), 4099);
  const targets = inits.map(() => ({ bytes: new Uint8Array(8192), writes: 0 }));
  const up = new StreamedUpload(fakeDevice(), targets, inits.map((init, id) => ({ id, size: 8192, init })), new Set([0]), new HeldMeter());
  await up.feed(0, 0, file.subarray(0, 3000));
  assert.throws(() => up.finish(0, 'prog.pte'), (err) => err instanceof InputError && /prog\.pte ended before the constants at bytes 1500\.\.4099/.test(err.message));
});

test('BytesFile chunks are views of the caller\'s bytes, in order', async () => {
  const bytes = new Uint8Array(20).map((_, i) => i);
  const seen = [];
  for await (const { offset, bytes: b } of new BytesFile(bytes.buffer, 'x').chunks()) seen.push([offset, b.byteLength, b.buffer === bytes.buffer]);
  assert.deepEqual(seen, [[0, 20, true]]);
});

test('Sha256 over chunks of any size is the sha256 of the bytes', async () => {
  const { Sha256 } = await import('../../web/sha256.js');
  const { createHash } = await import('node:crypto');
  const rand = seeded(7);
  for (const n of [0, 1, 55, 56, 63, 64, 65, 119, 120, 4099]) {
    const bytes = new Uint8Array(n).map(() => Math.floor(rand() * 256));
    for (const step of [1, 7, 64, 5000]) {
      const h = new Sha256();
      for (let at = 0; at < n; at += step) h.update(bytes.subarray(at, at + step));
      assert.equal(h.hex(), createHash('sha256').update(bytes).digest('hex'), `${n} bytes in steps of ${step}`);
    }
  }
});

/** A Blob whose first `stalls` slice streams never bring a byte (as Chromium's cache blobs now and then do). */
function stallingBlob(bytes, stalls) {
  const blob = new Blob([bytes]);
  let left = stalls;
  const wrap = (b) => ({
    size: b.size,
    slice: (a, z) => {
      const part = b.slice(a, z);
      if (left-- > 0) return { stream: () => new ReadableStream({ type: 'bytes', pull: () => new Promise(() => {}) }) };
      return part;
    },
  });
  return wrap(blob);
}

test('a Blob slice whose read stalls is read again with a new stream; one that always stalls is an InputError', async () => {
  const bytes = Uint8Array.from({ length: 3000 }, (_, i) => (i * 7) % 251);
  const read = async (file) => {
    const out = new Uint8Array(file.size);
    for await (const { offset, bytes: b } of file.chunks()) out.set(b, offset);
    return out;
  };
  const once = new BlobFile(stallingBlob(bytes, 1), 'x.pte', { chunkBytes: 1024, stallMs: [50, 50] });
  assert.deepEqual(await read(once), bytes);
  const always = new BlobFile(stallingBlob(bytes, 99), 'x.pte', { chunkBytes: 1024, stallMs: [20, 20, 20] });
  await assert.rejects(read(always), (err) => err instanceof InputError && /x\.pte could not be read at byte 0 \(no bytes came for 20 ms\)/.test(err.message));
});
