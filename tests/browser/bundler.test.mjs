// Tier 2, the npm package in a web app: `npm pack` the package, install the tarball offline into
// a minimal Vite app (tests/bundler/app/), serve it with `vite` (dev) and `vite build` +
// `vite preview` (production), and in headless Chromium run a fixture program against its
// reference, check that a corrupt program arrives as PteFormatError (typed errors survive
// minification), and in the production build, when the SmolLM2 folder exists (`make model`), a
// short greedy generation: `chat.completions.create` (stream and not) gives the ids of
// `generate()`. CI's time is short: the dev server is checked without the model, and KV cache
// reuse by follow-ups is left to tests/browser/model.test.mjs. Every non-local request is
// blocked and counted: the count must stay zero. Needs `npm run build` (dist/).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer as netServer } from 'node:net';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { build, createServer, preview } from 'vite';
import { readNpz } from '../bundler/npz.mjs';
import { CHROMIUM } from './browser.mjs';
import { serveStatic } from './server.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const WORK = join(ROOT, 'build/bundler');
const APP = join(WORK, 'app');
const FIXTURE = 'op_relu';
const TOLERANCE = 1e-4;
const MODEL = process.env.WEBPTE_SMOLLM2 ?? join(homedir(), '.cache/webpte/models/smollm2-135m-instruct-q8');
const HAS_MODEL = existsSync(join(MODEL, 'webpte_model.json'));
const PROMPT = 'What is the capital of France?';
const NEW_TOKENS = 2;
const LONG = { timeout: 300_000 };
const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));

assert.ok(existsSync(join(ROOT, 'dist/assets.js')), 'dist/ is missing or stale: run `npm run build` first');

/** Pack the package and install the tarball into a fresh copy of the app, offline. */
function installApp() {
  rmSync(WORK, { recursive: true, force: true });
  mkdirSync(WORK, { recursive: true });
  execFileSync('npm', ['pack', '--silent', '--pack-destination', WORK], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  cpSync(join(ROOT, 'tests/bundler/app'), APP, { recursive: true });
  execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--loglevel=error', join(WORK, `webpte-${version}.tgz`)],
    { cwd: APP, stdio: ['ignore', 'ignore', 'inherit'] });
}

function freePort() {
  return new Promise((res, rej) => {
    const s = netServer().listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => res(port)); });
    s.on('error', rej);
  });
}

const fixture = (() => {
  const ref = readNpz(join(ROOT, `tests/fixtures/${FIXTURE}.npz`));
  const arr = (t) => Array.from(new Float32Array(t.bytes.buffer.slice(t.bytes.byteOffset, t.bytes.byteOffset + t.bytes.byteLength)));
  assert.equal(ref.input_0.dtype, 'float32');
  return {
    pte: Array.from(readFileSync(join(ROOT, `tests/fixtures/${FIXTURE}.pte`))),
    input: { data: arr(ref.input_0), shape: ref.input_0.shape },
    expected: arr(ref.output_0),
  };
})();

let modelServer = null;
let browser;
const timings = [];

before(async () => {
  const t0 = performance.now();
  installApp();
  timings.push(`pack + offline install ${(performance.now() - t0).toFixed(0)}`);
  if (HAS_MODEL) modelServer = await serveStatic({ '/models/smollm2/': MODEL });
  browser = await chromium.launch({
    executablePath: CHROMIUM, headless: true,
    args: ['--enable-unsafe-webgpu', '--no-sandbox', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run', '--disable-quic', '--disable-dev-shm-usage'],
  });
});

after(async () => {
  for (const line of timings) console.log(`# timing (ms): ${line}`);
  await browser?.close();
  await modelServer?.close();
});

/** Vite settings of the test (port, proxy to the model server), merged over the app's config. */
function serverConfig(port) {
  const proxy = modelServer ? { '/models': modelServer.url } : undefined;
  return { host: '127.0.0.1', port, strictPort: true, proxy };
}

/** A fresh page of `url` with every request to another origin blocked and recorded. */
async function openApp(url) {
  const context = await browser.newContext();
  const blocked = [];
  await context.route('**/*', (route) => {
    const u = route.request().url();
    if (u.startsWith(`${url}/`)) return route.continue();
    blocked.push(u);
    return route.abort('blockedbyclient');
  });
  const page = await context.newPage();
  const errors = [];
  page.on('console', (m) => {
    if (process.env.WEBPTE_WEB_VERBOSE === '1' || m.type() === 'error') console.error(`[page ${m.type()}] ${m.text()}`);
  });
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${url}/`);
  await page.waitForFunction(() => window.appReady === true, null, { timeout: 60_000 });
  return { page, blocked, errors, close: () => context.close() };
}

/** The checks every build of the app must pass; returns the greedy ids (or null without a model). */
async function checkApp(t, url, label, { withModel = false } = {}) {
  const app = await openApp(url);
  try {
    const t0 = performance.now();
    const run = await app.page.evaluate(async ({ pte, input, expected }) => {
      const { loadProgram } = window.webpte;
      const program = await loadProgram(new Uint8Array(pte));
      const [out] = await program.run([{ data: new Float32Array(input.data), shape: input.shape }]);
      await program.dispose();
      let num = 0;
      let den = 0;
      for (let i = 0; i < expected.length; i++) { num += (out[i] - expected[i]) ** 2; den += expected[i] ** 2; }
      return { length: out.length, relL2: Math.sqrt(num / (den || 1)), nan: out.some(Number.isNaN) };
    }, fixture);
    timings.push(`${label}: Python boot + plan + run ${FIXTURE} ${(performance.now() - t0).toFixed(0)}`);
    assert.equal(run.length, fixture.expected.length);
    assert.equal(run.nan, false);
    assert.ok(run.relL2 <= TOLERANCE, `${FIXTURE}: rel-L2 ${run.relL2} > ${TOLERANCE}`);

    const corrupt = await app.page.evaluate(async (pte) => {
      const { loadProgram, PteFormatError, WebpteError } = window.webpte;
      try {
        await loadProgram(new Uint8Array(pte.slice(0, 200)));
        return null;
      } catch (err) {
        return { name: err.name, typed: err instanceof PteFormatError, base: err instanceof WebpteError, message: err.message };
      }
    }, fixture.pte);
    assert.deepEqual([corrupt?.name, corrupt?.typed, corrupt?.base], ['PteFormatError', true, true], JSON.stringify(corrupt));

    let ids = null;
    if (withModel) {
      const t1 = performance.now();
      const gen = await app.page.evaluate(async ({ prompt, n }) => {
        const model = await window.webpte.loadModel('/models/smollm2/');
        let text = '';
        let done = null;
        for await (const ev of model.generate({ prompt, maxNewTokens: n })) {
          if (ev.type === 'text') text += ev.text;
          else done = ev;
        }
        const messages = [{ role: 'user', content: prompt }];
        const request = { messages, max_tokens: n, temperature: 0 };
        // No reset between requests: each one keeps the KV rows of the same prompt (CI's time is short).
        const completion = await model.chat.completions.create(request);
        let streamed = '';
        let last = null;
        for await (const chunk of await model.chat.completions.create({ ...request, stream: true })) {
          streamed += chunk.choices[0]?.delta?.content ?? '';
          last = chunk;
        }
        await model.dispose();
        return { text, done, completion, streamed, last };
      }, { prompt: PROMPT, n: NEW_TOKENS });
      timings.push(`${label}: SmolLM2 load + ${NEW_TOKENS}-token generate + 2 chat completions ${(performance.now() - t1).toFixed(0)}`);
      ids = gen.done.tokenIds;
      assert.equal(gen.done.newTokens, NEW_TOKENS, JSON.stringify(gen.done));
      assert.ok(gen.text.length > 0);
      assert.equal(gen.completion.object, 'chat.completion');
      assert.ok(gen.completion.webpte.reusedRows > 0 && gen.last.webpte.reusedRows > 0, 'the chat requests reused the prompt rows');
      assert.deepEqual(gen.completion.webpte.tokenIds, ids, 'chat (stream: false) and generate() differ');
      assert.equal(gen.completion.choices[0].message.content, gen.done.text);
      assert.equal(gen.completion.choices[0].finish_reason, 'length');
      assert.deepEqual(gen.completion.usage, { prompt_tokens: gen.done.promptRows, completion_tokens: NEW_TOKENS, total_tokens: gen.done.promptRows + NEW_TOKENS });
      assert.equal(gen.streamed, gen.done.text);
      assert.deepEqual(gen.last.webpte.tokenIds, ids, 'chat (stream: true) and generate() differ');
      assert.equal(gen.last.choices[0].finish_reason, 'length');
      assert.equal(gen.last.usage.completion_tokens, NEW_TOKENS);
    }
    assert.deepEqual(app.errors, []);
    assert.deepEqual(app.blocked, [], 'requests left 127.0.0.1');
    t.diagnostic(`${label}: ${FIXTURE} within ${TOLERANCE}, PteFormatError typed${ids ? `, greedy ids ${ids}` : ''}`);
    return ids;
  } finally {
    await app.close();
  }
}

describe('the packed package in a Vite app', () => {
  test('npm pack ships every file the page needs', () => {
    const listing = execFileSync('tar', ['-tzf', join(WORK, `webpte-${version}.tgz`)], { encoding: 'utf8' }).split('\n');
    for (const f of ['dist/index.js', 'dist/worker.js', 'dist/assets.js', 'dist/pyodide/pyodide.asm.wasm',
      'dist/pyodide/python_stdlib.zip', 'dist/wheels/pyodide-lock.json', `dist/wheels/webpte-${version}-py3-none-any.whl`,
      'dist/vendor/tokenizers.mjs', 'types/index.d.ts', 'package.json']) {
      assert.ok(listing.includes(`package/${f}`), `the tarball lacks ${f}`);
    }
    assert.ok(!listing.some((f) => /^package\/(dist\/(demo|models)\/|dist\/sw\.js|dist\/index\.html)/.test(f)), 'demo files in the tarball');
  });

  test('vite (dev server)', LONG, async (t) => {
    const port = await freePort();
    const server = await createServer({ root: APP, configFile: join(APP, 'vite.config.js'), logLevel: 'warn', server: serverConfig(port) });
    await server.listen();
    try {
      await checkApp(t, `http://127.0.0.1:${port}`, 'dev');
    } finally {
      await server.close();
    }
  });

  test('vite build + vite preview (production, minified)', LONG, async (t) => {
    const t0 = performance.now();
    await build({ root: APP, configFile: join(APP, 'vite.config.js'), logLevel: 'warn', build: { outDir: join(WORK, 'out'), emptyOutDir: true } });
    timings.push(`vite build ${(performance.now() - t0).toFixed(0)}`);
    const port = await freePort();
    const server = await preview({ root: APP, configFile: join(APP, 'vite.config.js'), logLevel: 'warn', build: { outDir: join(WORK, 'out') }, preview: serverConfig(port) });
    try {
      const ids = await checkApp(t, `http://127.0.0.1:${port}`, 'production', { withModel: HAS_MODEL });
      if (!HAS_MODEL) t.diagnostic('no SmolLM2 folder (make model): generation not checked');
      else t.diagnostic(`SmolLM2 greedy ids ${ids}: generate() = chat (stream and not)`);
    } finally {
      await new Promise((r) => server.httpServer.close(r));
    }
  });
});
