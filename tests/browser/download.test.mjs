// Tier 2, downloads: a model folder (tests/fixtures/tiny_vlm) loaded in headless Chromium from
// a 127.0.0.1 server that cuts the decoder's first response at 50% (demo/serve.mjs `cut`). The
// worker resumes it with one `Range: bytes=N-` request, checks the pinned sha256 and caches it;
// every non-local request is blocked and the count must stay zero.
// Needs `npm run build` (dist/).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSuitePage } from './browser.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const TINY_VLM = join(ROOT, 'tests/fixtures/tiny_vlm');
const META = JSON.parse(readFileSync(join(TINY_VLM, 'webpte_model.json'), 'utf8'));
const CUT = '/tiny-vlm/decoder_q8.pte';
const SIZE = statSync(join(TINY_VLM, 'decoder_q8.pte')).size;
assert.ok(existsSync(join(ROOT, 'dist/index.js')), 'dist/ is missing: run `npm run build` first');

let s;
before(async () => {
  s = await openSuitePage({ '/dist/': join(ROOT, 'dist'), '/suite/': join(ROOT, 'tests/browser'), '/tiny-vlm/': TINY_VLM },
    { cut: { [CUT]: 0.5 } });
});
after(async () => { await s?.close(); });

describe('downloads', () => {
  test('a model file cut at 50% resumes with a Range request and is used only with its pinned sha256', { timeout: 600_000 }, async () => {
    const out = await s.page.evaluate(async (cut) => {
      const fetched = new Map();
      const err = await suite.errorOf((async () => {
        const model = await suite.webpte.loadModel('/tiny-vlm/', {
          preflight: false, // its Range requests are preflight.test.mjs's; this test counts the resume's
          onProgress: (e) => { if (e.stage === 'fetch' && e.file) fetched.set(e.file, [e.fileLoaded, e.fileTotal]); },
        });
        await model.dispose();
      })());
      const cache = await caches.open('webpte-models-v1');
      const hit = await cache.match(new URL(cut, location.href).href);
      const bytes = hit ? new Uint8Array(await hit.arrayBuffer()) : null;
      return { err, cached: bytes && Array.from(bytes), progress: Object.fromEntries(fetched) };
    }, CUT);
    assert.equal(out.err, null, JSON.stringify(out.err));
    // One Range request, from what the page had read of the cut body (all of its half unless
    // the browser dropped some unread bytes on the error).
    assert.equal(s.server.ranges.length, 1, JSON.stringify(s.server.ranges));
    const from = Number(/^\S+ bytes=(\d+)-$/.exec(s.server.ranges[0])?.[1]);
    assert.ok(s.server.ranges[0].startsWith(`${CUT} `) && from > 0 && from <= Math.floor(SIZE / 2),
      `resumed from ${s.server.ranges[0]}; the cut was at ${Math.floor(SIZE / 2)}`);
    assert.equal(s.server.hits.get(CUT), 2, 'the cut request and the resumed one');
    assert.ok(out.cached, 'the verified decoder was cached');
    assert.equal(createHash('sha256').update(Uint8Array.from(out.cached)).digest('hex'), META.sha256['decoder_q8.pte']);
    assert.deepEqual(out.progress['decoder_q8.pte'], [SIZE, SIZE], 'progress counts each byte once');
    assert.deepEqual(s.blocked, []);
  });
});
