// The demo page in headless Chromium, served from 127.0.0.1 like any static host: the bundled
// SmolLM2 answering end to end, a picked model folder, the error paths (no WebGPU, a
// truncated .pte, a file that fails its sha256) and the page opening offline. Every request
// to another host is blocked and counted; the count must stay zero.
// Needs `npm run build` (dist/) and the built SmolLM2 folder; `make test-demo` makes both.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as h from './harness.mjs';

const LONG = { timeout: 1_200_000 };
const SCREENSHOT = join(h.ROOT, 'out/demo-screenshot.png');
const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');

h.checkBuilt();
const meta = JSON.parse(readFileSync(join(h.MODEL, 'webpte_model.json'), 'utf8'));

/** Virtual model folders beside the real one: a truncated decoder whose meta matches it, and
 * a tokenizer_config.json changed after its sha256 was pinned. */
function brokenFolders() {
  const files = {};
  const mirror = (prefix, changed) => {
    for (const name of Object.keys(meta.sha256)) files[`/${prefix}/${name}`] = changed[name] ?? join(h.MODEL, name);
  };
  const truncated = readFileSync(join(h.MODEL, meta.decoder)).subarray(0, 100_000);
  mirror('bad-pte', { [meta.decoder]: truncated });
  files['/bad-pte/webpte_model.json'] = Buffer.from(JSON.stringify({ ...meta, sha256: { ...meta.sha256, [meta.decoder]: sha256(truncated) } }));
  const config = 'tokenizer/tokenizer_config.json';
  mirror('bad-hash', { [config]: Buffer.concat([readFileSync(join(h.MODEL, config)), Buffer.from(' ')]) });
  files['/bad-hash/webpte_model.json'] = Buffer.from(JSON.stringify(meta));
  return files;
}

let site;
let browser;
const rates = [];

before(async () => {
  site = await h.serveSite(brokenFolders());
  browser = await h.launch();
});

after(async () => {
  for (const line of rates) console.log(`# tokens/s in the page: ${line}`);
  await browser?.close();
  await site?.close();
  h.removeSite();
});

async function withPage(options, body) {
  const context = await h.guardedContext(browser, site, options);
  try {
    const page = await h.openDemo(context, site);
    await body(page, context);
  } finally {
    await context.close();
  }
  assert.deepEqual(context.blocked, [], 'requests to other hosts');
}

/** Record every label the progress line shows while loading. */
function watchProgress(page) {
  return page.evaluate(() => {
    window.progressSeen = [];
    const log = () => window.progressSeen.push(`${document.getElementById('progress-label').textContent} | ${document.getElementById('progress-detail').textContent}`);
    new MutationObserver(log).observe(document.getElementById('progress'), { subtree: true, childList: true, characterData: true });
  });
}

describe('demo page', () => {
  test('without WebGPU the capability check explains what to do and nothing is downloaded', LONG, async () => {
    const plain = await h.launch({ webgpu: false });
    site.hits.clear();
    try {
      const context = await h.guardedContext(plain, site);
      const page = await h.openDemo(context, site);
      assert.equal(await page.evaluate(() => document.body.dataset.state), 'no-webgpu');
      const err = await h.shownError(page);
      assert.equal(err?.name, 'NoWebGPUError');
      assert.equal(err.section, 'caps');
      assert.match(err.title, /WebGPU is not available/);
      assert.match(err.todo, /enable-unsafe-webgpu/);
      assert.equal(await page.isDisabled('#load'), true);
      assert.equal(await page.$eval('#sources', (el) => el.disabled), true);
      await page.waitForTimeout(500);
      assert.deepEqual(h.modelHits(site), [], 'model files requested');
      assert.deepEqual(context.blocked, []);
    } finally {
      await plain.close();
    }
  });

  test('the bundled SmolLM2 answers, follows up, stops, starts over and refuses a question past its context', LONG, async (t) => {
    await withPage({}, async (page) => {
      assert.equal(await page.evaluate(() => document.body.dataset.state), 'ready');
      assert.equal(await page.isVisible('#caps-details'), true);
      assert.equal(await page.isChecked('input[name=source][value=bundled]'), true);
      await watchProgress(page);
      await h.loadAndWait(page);
      assert.equal(await h.shownError(page), null);
      const seen = await page.evaluate(() => window.progressSeen);
      assert.ok(seen.some((s) => /^Downloading decoder_q8\.pte \| [\d.]+ [kMG]?B of \d+ MB/.test(s)), seen.slice(0, 20).join('\n'));
      assert.equal(await page.isVisible('#picture-controls'), false, 'a text-only model hides the picture controls');

      const paris = await h.ask(page, 'What is the capital of France?', { maxNewTokens: 32 });
      assert.equal(paris.error, null);
      assert.match(paris.text, /Paris/);
      assert.match(paris.prefill, /^[\d.]+ tok\/s/);
      assert.match(paris.decode, /^[\d.]+ tok\/s/);
      assert.match(paris.meta, /prefill \d+ of \d+ rows at [\d.]+ tok\/s · decode \d+ tokens at [\d.]+ tok\/s/);
      rates.push(`bundled model, first question: prefill ${paris.prefill}; decode ${paris.decode}`);
      t.diagnostic(`${paris.text} [${paris.meta}]`);
      mkdirSync(join(h.ROOT, 'out'), { recursive: true });
      await page.screenshot({ path: SCREENSHOT, fullPage: true });

      const followUp = await h.ask(page, 'And what is the capital of Italy?', { maxNewTokens: 16 });
      assert.equal(followUp.error, null);
      assert.match(followUp.meta, /\d+ rows reused/);

      await page.fill('#question', 'Write a long story about a cat who sails around the world.');
      await page.$eval('#max-new-tokens', (el) => { el.value = '200'; });
      await page.click('#ask');
      await page.waitForFunction(() => document.querySelector('#transcript .assistant:last-child .text').textContent.length > 0, null, { timeout: 600_000, polling: 100 });
      await page.click('#stop');
      await page.waitForFunction(() => !document.querySelector('#transcript .assistant:last-child').classList.contains('streaming'), null, { timeout: 120_000 });
      const stopped = await page.evaluate(() => document.querySelector('#transcript .assistant:last-child .meta').textContent);
      assert.match(stopped, /stopped/);
      assert.equal(await page.isEnabled('#ask'), true);

      await page.click('#new-conversation');
      await page.waitForFunction(() => document.getElementById('transcript').children.length === 0);
      const again = await h.ask(page, 'What is the capital of France?', { maxNewTokens: 32 });
      assert.match(again.text, /Paris/);
      assert.doesNotMatch(again.meta, /reused/, 'a new conversation starts with an empty cache');
      assert.equal(again.text, paris.text, 'greedy decoding gives the same answer');

      // A question longer than the context: refused before any decoding, with what to do.
      await page.fill('#question', 'Tell me about Paris. '.repeat(150));
      await page.click('#ask');
      await page.waitForFunction(() => !document.getElementById('error').hidden, null, { timeout: 120_000 });
      const full = await h.shownError(page);
      assert.equal(full.name, 'ContextFullError', JSON.stringify(full));
      assert.equal(full.section, 'chat');
      assert.match(full.todo, /New conversation/);
      assert.equal(await page.isEnabled('#ask'), true);
    });
  });

  test('a model folder picked on this computer loads and answers', LONG, async () => {
    await withPage({}, async (page) => {
      await page.check('input[name=source][value=folder]');
      assert.equal(await page.isDisabled('#load'), true, 'nothing picked yet');
      await page.setInputFiles('#folder-input', h.MODEL);
      await page.waitForFunction(() => document.getElementById('folder-summary').textContent);
      assert.match(await page.textContent('#folder-summary'), /SmolLM2.*text only/);
      site.hits.clear();
      await h.loadAndWait(page);
      assert.equal(await h.shownError(page), null);
      assert.deepEqual(h.modelHits(site), [], 'the folder is read in place, not fetched');
      const paris = await h.ask(page, 'What is the capital of France?', { maxNewTokens: 32 });
      assert.match(paris.text, /Paris/);
      rates.push(`picked folder: prefill ${paris.prefill}; decode ${paris.decode}`);
    });
  });

  test('a model folder dropped on the page loads', LONG, async () => {
    await withPage({}, async (page) => {
      const names = ['webpte_model.json', ...Object.keys(meta.sha256)];
      // A drop of loose files (no folder entries): they are matched by name.
      await page.evaluate(async (files) => {
        const dt = new DataTransfer();
        for (const name of files) {
          const blob = await (await fetch(`/models/smollm2/${name}`)).blob();
          dt.items.add(new File([blob], name.split('/').pop()));
        }
        document.getElementById('folder-drop').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
      }, names);
      await page.waitForFunction(() => document.getElementById('folder-summary').textContent);
      assert.equal(await page.isChecked('input[name=source][value=folder]'), true);
      assert.match(await page.textContent('#folder-summary'), new RegExp(`${names.length} files.*text only`));
      await h.loadAndWait(page);
      assert.equal(await h.shownError(page), null);
      assert.equal(await page.isVisible('#chat'), true);
    });
  });

  test('a picture dropped or taken with the camera goes with the next question only (stand-in model API)', LONG, async () => {
    const files = { '/vlm/webpte_model.json': Buffer.from(JSON.stringify({ ...meta, name: 'stand-in VLM', vision: 'vision.pte' })) };
    for (const name of Object.keys(meta.sha256)) files[`/vlm/${name}`] = join(h.MODEL, name);
    const own = await h.serveSite(files, { standIn: true });
    const withCamera = await h.launch({ camera: true });
    const context = await h.guardedContext(withCamera, own, { permissions: ['camera'] });
    try {
      const page = await h.openDemo(context, own);
      await page.check('input[name=source][value=hub]');
      await page.fill('#hub-url', `${own.url}/vlm/`);
      await h.loadAndWait(page);
      assert.equal(await page.isVisible('#picture-controls'), true);
      assert.equal(await page.isVisible('#picture-preview'), false);
      await page.evaluate(async () => {
        const canvas = new OffscreenCanvas(40, 30);
        const g = canvas.getContext('2d');
        g.fillStyle = '#c33';
        g.fillRect(0, 0, 40, 30);
        const dt = new DataTransfer();
        dt.items.add(new File([await canvas.convertToBlob({ type: 'image/png' })], 'red.png', { type: 'image/png' }));
        document.getElementById('picture-drop').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
      });
      // The preview shows once the dropped image is decoded (an undecoded <img> has no box).
      await page.waitForSelector('#picture-preview', { state: 'visible', timeout: 10_000 });
      assert.equal(await page.isVisible('#picture-preview'), true);
      await h.ask(page, 'What colour is this?');
      assert.equal(await page.isVisible('#picture-preview'), false, 'the composer is cleared');
      assert.equal(await page.locator('#transcript .user img.thumb').count(), 1);
      await h.ask(page, 'Are you sure?');
      const calls = await page.evaluate(() => globalThis.standInCalls);
      assert.equal(calls.length, 2);
      assert.equal(calls[0].image?.type, 'image/png');
      assert.ok(calls[0].image.size > 0);
      assert.equal(calls[1].image, null, 'a follow-up sends no picture again');

      // The camera: Chromium's synthetic one gives a frame, taken as a JPEG.
      assert.equal(await page.isVisible('#camera-open'), true);
      await page.click('#camera-open');
      await page.waitForFunction(() => document.getElementById('camera-video').videoWidth > 0, null, { timeout: 30_000 });
      await page.click('#camera-snap');
      // Encoding the frame is asynchronous: the dialog closes once the JPEG exists.
      await page.waitForSelector('#camera', { state: 'hidden', timeout: 30_000 });
      await page.waitForSelector('#picture-preview', { state: 'visible', timeout: 30_000 });
      await h.ask(page, 'And this one?');
      const snap = (await page.evaluate(() => globalThis.standInCalls))[2].image;
      assert.equal(snap?.type, 'image/jpeg');
      assert.ok(snap.size > 0);
    } finally {
      await context.close();
      await withCamera.close();
      await own.close();
    }
    assert.deepEqual(context.blocked, []);
  });

  test('a picture asked about with a real vision model: the tiny VLM fixture from its URL', LONG, async () => {
    const dir = join(h.ROOT, 'tests/fixtures/tiny_vlm');
    const vlmMeta = JSON.parse(readFileSync(join(dir, 'webpte_model.json'), 'utf8'));
    const expected = JSON.parse(readFileSync(join(dir, 'expected.json'), 'utf8'));
    const files = {};
    for (const name of ['webpte_model.json', 'picture.png', ...Object.keys(vlmMeta.sha256)]) files[`/tiny-vlm/${name}`] = join(dir, name);
    const own = await h.serveSite(files);
    const browser = await h.launch();
    const context = await h.guardedContext(browser, own);
    try {
      const page = await h.openDemo(context, own);
      await page.check('input[name=source][value=hub]');
      await page.fill('#hub-url', `${own.url}/tiny-vlm/`);
      await h.loadAndWait(page);
      assert.equal(await h.shownError(page), null);
      assert.equal(await page.isVisible('#picture-controls'), true);
      await page.setInputFiles('#picture-input', join(dir, 'picture.png'));
      await page.waitForSelector('#picture-preview', { state: 'visible', timeout: 30_000 });
      const answer = await h.ask(page, expected.questions[0], { maxNewTokens: expected.answer_ids[0].length });
      assert.equal(answer.error, null);
      assert.equal(answer.failed, false);
      const rows = expected.prompt_ids[0].length;
      assert.match(answer.meta, new RegExp(`^picture [\\d.]+ s · prefill ${rows} of ${rows} rows .* decode ${expected.answer_ids[0].length} tokens`));
      assert.ok(answer.text.length > 0);
      assert.equal(await page.locator('#transcript .user img.thumb').count(), 1);
      const follow = await h.ask(page, expected.questions[1], { maxNewTokens: 4 });
      assert.equal(follow.error, null);
      assert.doesNotMatch(follow.meta, /^picture/, 'the follow-up does not run the vision program');
      assert.match(follow.meta, new RegExp(`${expected.reused_rows[1]} rows reused`));
    } finally {
      await context.close();
      await browser.close();
      await own.close();
    }
    assert.deepEqual(context.blocked, []);
  });

  test('the model kept in the browser is listed with its size, also after a reload, and Delete removes it', LONG, async () => {
    const dir = join(h.ROOT, 'tests/fixtures/tiny_vlm');
    const vlmMeta = JSON.parse(readFileSync(join(dir, 'webpte_model.json'), 'utf8'));
    const files = {};
    for (const name of ['webpte_model.json', ...Object.keys(vlmMeta.sha256)]) files[`/tiny-vlm/${name}`] = join(dir, name);
    const bytes = Object.keys(vlmMeta.sha256).reduce((n, f) => n + readFileSync(join(dir, f)).length, 0);
    const own = await h.serveSite(files);
    const context = await h.guardedContext(browser, own);
    try {
      const page = await h.openDemo(context, own);
      assert.equal(await page.isVisible('#stored'), false, 'nothing stored yet');
      await page.check('input[name=source][value=hub]');
      await page.fill('#hub-url', `${own.url}/tiny-vlm/`);
      await h.loadAndWait(page);
      assert.equal(await h.shownError(page), null);
      await page.waitForSelector('#stored-list li', { timeout: 30_000 }); // listed once the load is over
      const listed = () => page.$$eval('#stored-list li', (lis) => lis.map((li) => ({ base: li.dataset.base, text: li.textContent })));
      const want = [{ base: `${own.url}/tiny-vlm/`, text: `${vlmMeta.name} ${(bytes / 1e3).toFixed(0)} kB in 6 files · ${own.url}/tiny-vlm/ Delete` }];
      assert.deepEqual(await listed(), want);
      await page.reload();
      await page.waitForFunction(() => document.body.dataset.state === 'ready', null, { timeout: 60_000 });
      assert.deepEqual(await listed(), want, 'listed again after a reload');
      await page.click('#stored-list li button');
      await page.waitForFunction(() => document.getElementById('stored-list').children.length === 0, null, { timeout: 30_000 });
      assert.match(await page.textContent('#stored-status'), new RegExp(`^Deleted ${vlmMeta.name.replace(/[()]/g, '\\$&')}: [\\d.]+ kB in 6 files\\.$`));
      assert.equal(await page.evaluate(async () => (await (await caches.open('webpte-models-v1')).keys()).length), 0);
    } finally {
      await context.close();
      await own.close();
    }
    assert.deepEqual(context.blocked, []);
  });

  for (const [folder, name, title] of [
    ['bad-pte', 'PteFormatError', /not a valid ExecuTorch program/],
    ['bad-hash', 'HashMismatchError', /does not match its pinned checksum/],
  ]) {
    test(`a model folder with ${folder === 'bad-pte' ? 'a truncated .pte' : 'a file that fails its sha256'} shows the ${name} advice`, LONG, async () => {
      await withPage({}, async (page) => {
        await page.check('input[name=source][value=hub]');
        await page.fill('#hub-url', `${site.url}/${folder}/`);
        await h.loadAndWait(page);
        const err = await h.shownError(page);
        assert.equal(err?.name, name, JSON.stringify(err));
        assert.equal(err.section, 'model');
        assert.match(err.title, title);
        assert.ok(err.message.length > 0 && err.todo.length > 0);
        assert.equal(await page.isVisible('#chat'), false);
        assert.match(await page.textContent('#model-status'), /could not be loaded/);
      });
    });
  }

  test('offline: once loaded, the page and the bundled model work with the server gone', LONG, async () => {
    const own = await h.serveSite();
    const context = await h.guardedContext(browser, own, { serviceWorkers: 'allow' });
    try {
      const page = await h.openDemo(context, own);
      await page.evaluate(async () => {
        await navigator.serviceWorker.ready;
        if (!navigator.serviceWorker.controller) {
          await new Promise((r) => navigator.serviceWorker.addEventListener('controllerchange', r, { once: true }));
        }
      });
      await h.loadAndWait(page);
      assert.equal(await h.shownError(page), null);
      await own.close();
      await page.reload();
      await page.waitForFunction(() => document.body.dataset.state, null, { timeout: 60_000 });
      assert.equal(await page.evaluate(() => document.body.dataset.state), 'ready');
      assert.match(await page.textContent('#caps-status'), /WebGPU is available/);
      assert.equal(await page.isChecked('input[name=source][value=bundled]'), true, 'the bundled model is still offered');
      await h.loadAndWait(page);
      assert.equal(await h.shownError(page), null);
      const paris = await h.ask(page, 'What is the capital of France?', { maxNewTokens: 8 });
      assert.match(paris.text, /Paris/);
    } finally {
      await context.close();
      await own.close();
    }
    assert.deepEqual(context.blocked, []);
  });
});
