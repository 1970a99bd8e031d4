// Tier 2, the examples as a reader uses them: each folder of examples/ is copied, the packed
// package installed into it offline (tests/bundler/harness.mjs), built where it has a build,
// served from 127.0.0.1 and driven through its own page in headless Chromium: load a model
// folder, ask, see the answer stream in, ask a follow-up that reuses the KV cache. The models
// are the committed test folders (random weights, so the answers are noise; their token ids
// are checked against the numpy interpreter by model.test.mjs and gemma4.test.mjs). Every
// request that leaves 127.0.0.1 is blocked and counted: the count must stay zero.
// Needs `npm run build` (dist/).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as netServer } from 'node:net';
import { join } from 'node:path';
import { build, preview } from 'vite';
import { ROOT, launchBrowser, packedTarball } from '../bundler/harness.mjs';
import { serveStatic } from './server.mjs';

const WORK = join(ROOT, 'build/examples');
const GEMMA = join(ROOT, 'tests/fixtures/gemma4/model');       // text, 128 positions
const TINY_VLM = join(ROOT, 'tests/fixtures/tiny_vlm');         // vision + text
const VLM_EXPECTED = JSON.parse(readFileSync(join(TINY_VLM, 'expected.json'), 'utf8'));
const LONG = { timeout: 300_000 };

let browser;
const timings = [];
const since = (t0) => (performance.now() - t0).toFixed(0);

before(async () => {
  assert.ok(existsSync(join(ROOT, 'dist/assets.js')), 'dist/ is missing: run `npm run build` first');
  browser = await launchBrowser();
});

after(async () => {
  for (const line of timings) console.log(`# timing (ms): ${line}`);
  await browser?.close();
});

/**
 * A copy of examples/`name` with the packed package installed as its README says (`npm install`),
 * offline: only the package itself is installed, since Vite comes from the repository's own
 * node_modules.
 */
function installExample(name) {
  const dir = join(WORK, name);
  rmSync(dir, { recursive: true, force: true });
  cpSync(join(ROOT, 'examples', name), dir, {
    recursive: true, filter: (src) => !/[\\/](node_modules|dist)$/.test(src) });
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  assert.ok(pkg.dependencies?.webpte, `examples/${name} depends on webpte`);
  delete pkg.dependencies;
  delete pkg.devDependencies;
  writeFileSync(join(dir, 'package.json'), JSON.stringify(pkg, null, 2));
  execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--loglevel=error', packedTarball()],
    { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
  return dir;
}

function freePort() {
  return new Promise((res, rej) => {
    const s = netServer().listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => res(port)); });
    s.on('error', rej);
  });
}

/** The page at `url` with every request to another origin blocked and recorded. */
async function openPage(origin, url) {
  const context = await browser.newContext();
  const blocked = [];
  await context.route('**/*', (route) => {
    const u = route.request().url();
    if (u.startsWith(`${origin}/`)) return route.continue();
    blocked.push(u);
    return route.abort('blockedbyclient');
  });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => {
    if (process.env.WEBPTE_WEB_VERBOSE === '1' || m.type() === 'error') console.error(`[page ${m.type()}] ${m.text()}`);
  });
  await page.goto(url);
  return { page, blocked, errors, close: () => context.close() };
}

/** Press Load and wait until the question field is usable; returns the status line. */
async function loadModelInPage(page) {
  await page.click('#load');
  await page.waitForFunction(() => !document.getElementById('question').disabled
    || /Error/.test(document.getElementById('status').textContent), null, { timeout: 240_000 });
  const status = await page.textContent('#status');
  assert.match(status, /is ready/, status);
  return status;
}

/**
 * Ask `question` through the page's form; resolves when the answer is done, with the status
 * line, the assistant's text and the distinct lengths the answer had while it streamed.
 */
async function ask(page, question, maxTokens) {
  await page.fill('#max-tokens', String(maxTokens));
  await page.fill('#question', question);
  await page.evaluate(() => {
    window.answerLengths = new Set();
    const log = document.getElementById('log');
    new MutationObserver(() => {
      const last = log.lastElementChild;
      if (last?.classList.contains('assistant')) window.answerLengths.add(last.textContent.length);
    }).observe(log, { childList: true, subtree: true, characterData: true });
  });
  await page.click('#send');
  await page.waitForFunction(() => /prompt tokens|Error/.test(document.getElementById('status').textContent)
    && !document.getElementById('send').disabled, null, { timeout: 120_000 });
  const status = await page.textContent('#status');
  const answer = await page.evaluate(() => document.getElementById('log').lastElementChild.textContent);
  const lengths = await page.evaluate(() => [...window.answerLengths].filter((n) => n > 0).length);
  const m = /^(\d+) prompt tokens \((\d+) reused\), (\d+) new/.exec(status);
  assert.ok(m, `status after the answer: ${status}`);
  return { status, answer, streamed: lengths, prompt: +m[1], reused: +m[2], fresh: +m[3] };
}

describe('examples/', () => {
  test('html-importmap: one HTML file, no bundler, chats with a model folder', LONG, async (t) => {
    let t0 = performance.now();
    const dir = installExample('html-importmap');
    timings.push(`html-importmap: pack (or reuse) + offline install ${since(t0)}`);
    const server = await serveStatic({ '/models/gemma/': GEMMA }, { root: dir });
    const app = await openPage(server.url, `${server.url}/?model=/models/gemma/`);
    try {
      t0 = performance.now();
      await loadModelInPage(app.page);
      timings.push(`html-importmap: Python boot + load the tiny Gemma folder ${since(t0)}`);
      t0 = performance.now();
      const first = await ask(app.page, 'hi', 6);
      assert.equal(first.fresh, 6, first.status);
      assert.equal(first.reused, 0, first.status);
      assert.ok(first.streamed >= 2, `the answer arrived in one piece (${first.streamed} lengths seen)`);
      const second = await ask(app.page, 'who are you?', 4);
      assert.equal(second.fresh, 4, second.status);
      assert.ok(second.reused >= first.prompt, `the follow-up reused ${second.reused} rows of ${first.prompt}`);
      timings.push(`html-importmap: two questions ${since(t0)}`);
      assert.equal(await app.page.locator('#log .turn').count(), 4);
      assert.deepEqual(app.errors, []);
      assert.deepEqual(app.blocked, [], 'requests left 127.0.0.1');
      t.diagnostic(`html-importmap: ${first.status}; then ${second.status}`);
    } finally {
      await app.close();
      await server.close();
    }
  });

  test('vite-chat: vite build + vite preview, a picture, streaming, a follow-up', LONG, async (t) => {
    let t0 = performance.now();
    const dir = installExample('vite-chat');
    const config = { root: dir, configFile: join(dir, 'vite.config.js'), logLevel: 'warn' };
    await build({ ...config, build: { outDir: join(dir, 'dist'), emptyOutDir: true } });
    timings.push(`vite-chat: offline install + vite build ${since(t0)}`);
    const models = await serveStatic({ '/models/tiny-vlm/': TINY_VLM });
    const port = await freePort();
    const server = await preview({ ...config, build: { outDir: join(dir, 'dist') },
      preview: { host: '127.0.0.1', port, strictPort: true, proxy: { '/models': models.url } } });
    const origin = `http://127.0.0.1:${port}`;
    const app = await openPage(origin, `${origin}/?model=/models/tiny-vlm/`);
    try {
      t0 = performance.now();
      await loadModelInPage(app.page);
      timings.push(`vite-chat: Python boot + load the tiny VLM folder ${since(t0)}`);
      t0 = performance.now();
      assert.equal(await app.page.isDisabled('#picture'), false, 'a vision model takes a picture');
      await app.page.setInputFiles('#picture', join(TINY_VLM, 'picture.png'));
      await app.page.waitForSelector('#thumb:not([hidden])');
      const [q1, q2] = VLM_EXPECTED.questions;
      const first = await ask(app.page, q1, VLM_EXPECTED.answer_ids[0].length);
      // The picture's rows are in the prompt: the numpy interpreter's prompt for the same turn.
      assert.equal(first.prompt, VLM_EXPECTED.prompt_ids[0].length, first.status);
      assert.equal(first.reused, 0);
      assert.equal(first.fresh, VLM_EXPECTED.answer_ids[0].length);
      assert.ok(first.streamed >= 2, `the answer arrived in one piece (${first.streamed} lengths seen)`);
      assert.equal(await app.page.locator('#log li.user img').count(), 1);
      const second = await ask(app.page, q2, 4);
      assert.ok(second.reused >= first.prompt, `the follow-up reused ${second.reused} rows, not the picture's turn`);
      timings.push(`vite-chat: a question with the picture and a follow-up ${since(t0)}`);
      assert.deepEqual(app.errors, []);
      assert.deepEqual(app.blocked, [], 'requests left 127.0.0.1');
      t.diagnostic(`vite-chat: ${first.status}; then ${second.status}`);
    } finally {
      await app.close();
      await new Promise((r) => server.httpServer.close(r));
      await models.close();
    }
  });
});
