// Model files in the worker (web/files.js, web/progress.js) with a fake network and a fake
// Cache API: byte and ETA accounting, pinned sha256 and size checks (a wrong file is refused
// and never cached), a corrupted cache entry fetched again, quota errors, missing files, and
// local folders matched by relative path.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { LocalFolder, UrlFolder, findMeta, readModelFiles, sha256Hex } from '../../web/files.js';
import { Progress } from '../../web/progress.js';
import { HashMismatchError, ModelFolderError } from '../../web/errors.js';

const BASE = 'http://127.0.0.1:9/m/';
const bytes = (n, seed = 1) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed * 7) % 251);
const hex = (b) => createHash('sha256').update(b).digest('hex');

/** Serve `files` ({name: Uint8Array}) from BASE in `chunk`-byte chunks; counts GETs per name. */
function fakeNetwork(files, { chunk = 1000 } = {}) {
  const hits = new Map();
  globalThis.fetch = async (url) => {
    const name = url.slice(BASE.length);
    hits.set(name, (hits.get(name) ?? 0) + 1);
    const body = files[name];
    if (!body) return new Response(null, { status: 404 });
    const stream = new ReadableStream({
      start(c) {
        for (let i = 0; i < body.length; i += chunk) c.enqueue(body.slice(i, i + chunk));
        c.close();
      },
    });
    return new Response(stream, { headers: { 'content-length': String(body.length) } });
  };
  return hits;
}

function fakeCaches({ quota = Infinity, fail = null } = {}) {
  const store = new Map();
  let used = 0;
  globalThis.caches = {
    async open() {
      return {
        async match(url) { return store.has(url) ? new Response(store.get(url)) : undefined; },
        async put(url, resp) {
          const b = new Uint8Array(await resp.arrayBuffer());
          if (fail) throw fail();
          if (used + b.length > quota) throw new DOMException('quota', 'QuotaExceededError');
          used += b.length;
          store.set(url, b);
        },
        async delete(url) { return store.delete(url); },
      };
    },
  };
  return store;
}

const FILES = { 'big.pte': bytes(5000, 1), 'tok/tokenizer.json': bytes(1500, 2), 'free.bin': bytes(700, 3) };
const SPECS = [
  { name: 'big.pte', size: null, sha256: hex(FILES['big.pte']) },
  { name: 'tok/tokenizer.json', size: 1500, sha256: hex(FILES['tok/tokenizer.json']) },
  { name: 'free.bin', size: null, sha256: null },
];

test('sha256Hex is the sha256 of the bytes', async () => {
  assert.equal(await sha256Hex(FILES['big.pte']), hex(FILES['big.pte']));
});

test('progress: bytes over all files, ETA at the network rate, throttled events', () => {
  let now = 0;
  const events = [];
  const p = new Progress((e) => events.push(e), { intervalMs: 100, now: () => now });
  p.expect('a', 1000);
  p.expect('b', 3000);
  assert.equal(p.etaSeconds(), null, 'no rate before any network byte');
  p.add('b', 1000, { network: false }); // cached bytes: counted, not part of the rate
  assert.equal(p.etaSeconds(), null);
  now = 1;
  p.add('a', 500);
  now = 1001; // 500 network bytes in 1 s
  p.add('a', 500);
  assert.deepEqual([p.loaded, p.total], [2000, 4000]);
  assert.ok(Math.abs(p.etaSeconds() - 2000 / (1000 / 1.001)) < 1e-6, String(p.etaSeconds()));
  now = 1002;
  p.add('b', 10); // within 100 ms of the last event: not emitted
  const last = events.at(-1);
  assert.deepEqual({ ...last, etaSeconds: null }, { stage: 'fetch', file: 'a', loaded: 2000, total: 4000, fileLoaded: 1000, fileTotal: 1000, etaSeconds: null });
  assert.equal(events.length, 2, 'b (cached, first event), a (complete); the chunk between is throttled');
  p.add('b', 1990);
  assert.equal(events.at(-1).loaded, 4000, 'a completed file is always reported');
  assert.equal(p.etaSeconds(), 0);
  p.add('c', 50); // a file of unknown size grows the total
  assert.equal(p.total, 4050);
});

test('a folder is fetched, checked, and its pinned files cached; events fetch then verify', async () => {
  const hits = fakeNetwork(FILES);
  const store = fakeCaches();
  const events = [];
  const out = await readModelFiles(new UrlFolder(BASE), SPECS, { emit: (e) => events.push(e) });
  assert.deepEqual([...out.keys()].sort(), Object.keys(FILES).sort());
  for (const [k, v] of Object.entries(FILES)) assert.deepEqual(new Uint8Array(out.get(k)), v);
  assert.deepEqual([...store.keys()].sort(), [`${BASE}big.pte`, `${BASE}tok/tokenizer.json`], 'unpinned files are not cached');
  const stages = events.map((e) => e.stage);
  assert.equal(stages.lastIndexOf('fetch') < stages.indexOf('verify'), true, stages.join());
  const fetched = events.filter((e) => e.stage === 'fetch').at(-1);
  assert.deepEqual([fetched.loaded, fetched.total], [7200, 7200]);
  const verified = events.filter((e) => e.stage === 'verify').at(-1);
  assert.deepEqual([verified.loaded, verified.total], [6500, 6500]);
  // Again: pinned files come from the cache (checked again), the unpinned one from the network.
  await readModelFiles(new UrlFolder(BASE), SPECS);
  assert.deepEqual(Object.fromEntries(hits), { 'big.pte': 1, 'tok/tokenizer.json': 1, 'free.bin': 2 });
});

test('a wrong file is refused with HashMismatchError and not cached', async () => {
  const wrong = FILES['big.pte'].slice();
  wrong[4321] ^= 1;
  fakeNetwork({ ...FILES, 'big.pte': wrong });
  const store = fakeCaches();
  const err = await readModelFiles(new UrlFolder(BASE), SPECS).catch((e) => e);
  assert.ok(err instanceof HashMismatchError, String(err));
  assert.equal(err.file, 'big.pte');
  assert.equal(err.expected, SPECS[0].sha256);
  assert.equal(err.actual, hex(wrong));
  assert.match(err.message, /big\.pte does not match its pinned sha256.*not used.*download the files again/s);
  assert.equal(store.size, 0, 'nothing is cached when a file fails');
  // A pinned size is checked too; verify: false skips the hashes but not the size.
  fakeNetwork({ ...FILES, 'tok/tokenizer.json': bytes(1499, 2) });
  const size = await readModelFiles(new UrlFolder(BASE), SPECS, { cache: false }).catch((e) => e);
  assert.ok(size instanceof HashMismatchError && /1499 bytes, the pinned file is 1500/.test(size.message), String(size));
  fakeNetwork({ ...FILES, 'big.pte': wrong });
  const unchecked = await readModelFiles(new UrlFolder(BASE), SPECS, { verify: false, cache: false });
  assert.deepEqual(new Uint8Array(unchecked.get('big.pte')), wrong);
});

test('a corrupted cache entry is detected by its hash and fetched again', async () => {
  const hits = fakeNetwork(FILES);
  const store = fakeCaches();
  store.set(`${BASE}big.pte`, bytes(5000, 9)); // corrupted in storage
  const out = await readModelFiles(new UrlFolder(BASE), SPECS);
  assert.deepEqual(new Uint8Array(out.get('big.pte')), FILES['big.pte']);
  assert.equal(hits.get('big.pte'), 1);
  assert.deepEqual(store.get(`${BASE}big.pte`), FILES['big.pte'], 'the cache holds the right bytes again');
});

test('a full storage quota loads the files uncached, with a cache event that says what to do', async () => {
  fakeNetwork(FILES);
  const store = fakeCaches({ quota: 2000 });
  const events = [];
  const out = await readModelFiles(new UrlFolder(BASE), SPECS, { emit: (e) => events.push(e) });
  assert.deepEqual(new Uint8Array(out.get('big.pte')), FILES['big.pte']);
  const refused = events.filter((e) => e.stage === 'cache');
  assert.ok(refused.length >= 1, JSON.stringify(events.map((e) => e.stage)));
  for (const e of refused) {
    assert.equal(e.stored, false);
    assert.equal(e.error.name, 'QuotaError');
    assert.match(e.error.message, /storage quota.*loads without caching.*\{ cache: false \}/s);
    assert.equal(store.has(`${BASE}${e.file}`), false, `${e.file} is not half-stored`);
  }
});

test('any other storage failure loads the files uncached too', async () => {
  fakeNetwork(FILES);
  const store = fakeCaches({ fail: () => new DOMException('Unexpected internal error.', 'UnknownError') });
  const events = [];
  const out = await readModelFiles(new UrlFolder(BASE), SPECS, { emit: (e) => events.push(e) });
  assert.deepEqual(new Uint8Array(out.get('big.pte')), FILES['big.pte']);
  const refused = events.filter((e) => e.stage === 'cache').map((e) => [e.file, e.error.name]);
  assert.deepEqual(refused.sort(), SPECS.filter((s) => s.sha256).map((s) => [s.name, 'WebpteError']).sort());
  assert.equal(store.size, 0);
});

test('missing files are one ModelFolderError listing each', async () => {
  fakeNetwork({ 'free.bin': FILES['free.bin'] });
  fakeCaches();
  const err = await readModelFiles(new UrlFolder(BASE), SPECS).catch((e) => e);
  assert.ok(err instanceof ModelFolderError, String(err));
  assert.deepEqual(err.problems, [`missing big.pte (HTTP 404 at ${BASE}big.pte)`, `missing tok/tokenizer.json (HTTP 404 at ${BASE}tok/tokenizer.json)`]);
});

test('the meta file is found by name; files already in hand are not fetched again', async () => {
  const hits = fakeNetwork({ ...FILES, 'vlm_meta.json': bytes(10) });
  fakeCaches();
  const meta = await findMeta(new UrlFolder(BASE));
  assert.equal(meta.name, 'vlm_meta.json');
  assert.deepEqual(Object.fromEntries(hits), { 'webpte_model.json': 1, 'vlm_meta.json': 1 });
  await readModelFiles(new UrlFolder(BASE), [...SPECS, { name: 'vlm_meta.json', sha256: hex(bytes(10)) }],
    { have: new Map([['vlm_meta.json', meta.bytes]]) });
  assert.equal(hits.get('vlm_meta.json'), 1);
});

test('local folders: files matched by relative path, else by a unique name; no cache', async () => {
  const file = (path, data) => {
    const f = new File([data], path.split('/').pop());
    Object.defineProperty(f, 'webkitRelativePath', { value: path });
    return f;
  };
  const picked = [
    file('Model/big.pte', FILES['big.pte']), file('Model/tok/tokenizer.json', FILES['tok/tokenizer.json']),
    file('Model/old/tok/tokenizer.json', bytes(3)), file('Model/free.bin', FILES['free.bin']),
  ];
  const folder = new LocalFolder(picked);
  assert.equal(folder.find('tok/tokenizer.json'), picked[1], 'the shortest matching path wins');
  const events = [];
  const out = await readModelFiles(folder, SPECS, { emit: (e) => events.push(e) });
  assert.deepEqual(new Uint8Array(out.get('tok/tokenizer.json')), FILES['tok/tokenizer.json']);
  assert.equal(events.filter((e) => e.stage === 'fetch').at(-1).loaded, 7200);
  const flat = new LocalFolder([new File([FILES['tok/tokenizer.json']], 'tokenizer.json'), new File([], 'a.json'), new File([], 'a.json')]);
  assert.ok(flat.find('tok/tokenizer.json'), 'a dropped file without its folder matches by name');
  assert.equal(flat.find('x/a.json'), null, 'two files of that name: ambiguous');
  assert.equal((await findMeta(new LocalFolder([new File([], 'smolvlm_decoder_q8.pte')]))).name, 'vlm_meta.json');
  const missing = await readModelFiles(new LocalFolder(picked.slice(1)), SPECS).catch((e) => e);
  assert.ok(missing instanceof ModelFolderError && /missing big\.pte \(not among the 3 picked files\)/.test(missing.message), String(missing));
});
