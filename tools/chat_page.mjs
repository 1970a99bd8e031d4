// A greedy chat turn with a model folder in the page (headless Chromium, WebGPU on SwiftShader),
// compared with the ids the folder's chat_expected.json records for webpte's numpy interpreter
// (tools/real_size_chat.py expect): what a user of loadModel + generate gets at this size.
//   node tools/chat_page.mjs FOLDER [--limits default|JSON] [--no-cache]
// Prints the load time, the bytes of the folder, the worker's peak JS heap during the load (CDP,
// tools/worker_heap.mjs), the prompt and decode times
// and the ids; exits 1 when the page's ids leave the interpreter's other than after a
// genuine near-tie (the GPU's margin there under NEAR_TIE). Needs `npm run build` (dist/).
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSuitePage } from '../tests/browser/browser.mjs';
import { heapPoller } from './worker_heap.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
// Logit margin (random-weight logits are O(1..10)) within which another driver's float sums
// may pick the runner-up.
const NEAR_TIE = 0.02;

function options(argv) {
  const [folder, ...rest] = argv;
  if (!folder) throw new Error('usage: node tools/chat_page.mjs FOLDER [--limits default|JSON] [--no-cache]');
  const opts = { folder: resolve(folder), limits: null, cache: true };
  for (let i = 0; i < rest.length; i += 2) {
    if (rest[i] === '--no-cache') { opts.cache = false; i -= 1; }
    else if (rest[i] === '--limits') opts.limits = rest[i + 1] === 'default' ? 'default' : JSON.parse(rest[i + 1]);
    else throw new Error(`unknown option ${rest[i]}`);
  }
  return opts;
}

async function main() {
  const opts = options(process.argv.slice(2));
  const want = JSON.parse(readFileSync(join(opts.folder, 'chat_expected.json'), 'utf8'));
  const s = await openSuitePage({ '/dist/': process.env.WEBPTE_DIST ?? join(ROOT, 'dist'), '/suite/': join(ROOT, 'tests/browser'), '/model/': opts.folder });
  try {
    await s.page.evaluate(() => suite.webpte.runtimeInfo?.()); // the worker starts: its heap is polled
    const poller = await heapPoller(s.page);
    const loaded = await s.page.evaluate(async ({ limits, cache }) => {
      try {
        const t0 = performance.now();
        let bytes = 0;
        const uncached = [];
        window.model = await suite.webpte.loadModel('/model/', {
          limits, cache, onProgress: (ev) => {
            if (ev.total) bytes = Math.max(bytes, ev.total);
            if (ev.stage === 'cache') uncached.push(`${ev.file} (${ev.error.name})`);
          },
        });
        return { loadMs: performance.now() - t0, bytes, uncached, stats: window.model.stats };
      } catch (err) {
        return { error: { name: err?.name, message: String(err?.message ?? err) } };
      }
    }, { limits: opts.limits, cache: opts.cache });
    const peakHeap = await poller.stop();
    if (loaded.error) throw new Error(`the page failed: ${JSON.stringify(loaded.error)}`);
    const got = await s.page.evaluate(async ({ prompt, maxNewTokens }) => {
      try {
        let done = null;
        for await (const ev of window.model.generate({ prompt, maxNewTokens })) if (ev.type === 'done') done = ev;
        return { done };
      } catch (err) {
        return { error: { name: err?.name, message: String(err?.message ?? err) } };
      }
    }, { prompt: want.prompt, maxNewTokens: want.max_new_tokens });
    Object.assign(got, loaded);
    if (got.error) throw new Error(`the page failed: ${JSON.stringify(got.error)}`);
    const ref = want.reference.token_ids;
    console.log(`load ${(got.loadMs / 1000).toFixed(1)} s (${(got.bytes / 2 ** 20).toFixed(0)} MiB of files)`
      + (got.uncached.length ? `; the browser refused to cache ${got.uncached.join(', ')}` : ''));
    const held = got.stats.embeddings_held_bytes;
    console.log(`worker memory: peak JS heap (with ArrayBuffers) during the load ${(peakHeap / 2 ** 20).toFixed(1)} MiB`
      + (held == null ? '' : `; the embedding table held at most ${(held / 2 ** 20).toFixed(2)} MiB at once`));
    const d = got.done;
    console.log(`prompt ${d.computedRows} rows in ${d.prefillSeconds.toFixed(1)} s; ${d.newTokens} tokens at `
      + `${d.decodeTokensPerSecond.toFixed(2)} tokens/s (${(1000 / d.decodeTokensPerSecond).toFixed(0)} ms a token)`);
    got.tokenIds = d.tokenIds;
    console.log(`page        ${JSON.stringify(got.tokenIds)}`);
    console.log(`interpreter ${JSON.stringify(ref)}`);
    const at = got.tokenIds.findIndex((id, k) => id !== ref[k]);
    if (at < 0 && got.tokenIds.length === ref.length) {
      console.log(`same ids (${ref.length} tokens)`);
      return 0;
    }
    if (at >= 0 && want.gaps[at] <= NEAR_TIE) {
      console.log(`near-tie at token ${at} (native margin ${want.gaps[at].toFixed(4)}); same ids before it`);
      return 0;
    }
    console.log(`different ids from token ${at < 0 ? got.tokenIds.length : at}`);
    return 1;
  } finally {
    await s.close();
  }
}

main().then((rc) => process.exit(rc), (err) => { console.error(err); process.exit(1); });
