// What the bundler tests share (tests/browser/bundler.test.mjs for Vite, bundlers.test.mjs for
// webpack and esbuild): one `npm pack` tarball of the package, an offline install of it into a
// fresh copy of the minimal app (tests/bundler/app/), headless Chromium, and the checks every
// build of the app must pass in the page.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { CHROMIUM } from '../browser/browser.mjs';
import { readNpz } from './npz.mjs';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const PACKS = join(ROOT, 'build/bundler-pack');
const FIXTURE = 'op_relu';
export const TOLERANCE = 1e-4;
export const MODEL = process.env.WEBPTE_SMOLLM2 ?? join(homedir(), '.cache/webpte/models/smollm2-135m-instruct-q8');
export const HAS_MODEL = existsSync(join(MODEL, 'webpte_model.json'));
const PROMPT = 'What is the capital of France?';
const NEW_TOKENS = 2;
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
export const VERSION = pkg.version;
export const TARBALL = join(PACKS, `webpte-${VERSION}.tgz`);

/** Every file `npm pack` would take (package.json `files`), by path, size and mtime. */
function packedFilesStamp() {
  const hash = createHash('sha256');
  const walk = (p) => {
    const s = statSync(p);
    if (s.isDirectory()) for (const e of readdirSync(p).sort()) walk(join(p, e));
    else hash.update(`${p}\0${s.size}\0${s.mtimeMs}\n`);
  };
  for (const f of ['package.json', 'README.md', ...pkg.files]) if (existsSync(join(ROOT, f))) walk(join(ROOT, f));
  return hash.digest('hex');
}

/**
 * The package's tarball, packed once for all bundler tests: a tarball whose files have not
 * changed since (same paths, sizes and mtimes) is reused.
 */
export function packedTarball() {
  const stamp = packedFilesStamp();
  const stampFile = `${TARBALL}.stamp`;
  if (existsSync(TARBALL) && existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp) return TARBALL;
  rmSync(PACKS, { recursive: true, force: true });
  mkdirSync(PACKS, { recursive: true });
  execFileSync('npm', ['pack', '--silent', '--pack-destination', PACKS], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  writeFileSync(stampFile, stamp);
  return TARBALL;
}

/** A fresh copy of the app in `dir` with the packed package installed, offline. */
export function installApp(dir) {
  assert.ok(existsSync(join(ROOT, 'dist/assets.js')), 'dist/ is missing or stale: run `npm run build` first');
  const tarball = packedTarball();
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dirname(dir), { recursive: true });
  cpSync(join(ROOT, 'tests/bundler/app'), dir, { recursive: true });
  execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--loglevel=error', tarball],
    { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
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

/** Headless Chromium with WebGPU and none of its own background traffic. */
export function launchBrowser() {
  return chromium.launch({
    executablePath: CHROMIUM, headless: true,
    args: ['--enable-unsafe-webgpu', '--no-sandbox', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run', '--disable-quic', '--disable-dev-shm-usage'],
  });
}

/** A fresh page of `url` with every request to another origin blocked and recorded. */
async function openApp(browser, url) {
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

/** The fixture program against its reference, in the page. */
async function checkFixture(page) {
  const run = await page.evaluate(async ({ pte, input, expected }) => {
    const { loadProgram } = window.webpte;
    const program = await loadProgram(new Uint8Array(pte));
    const [out] = await program.run([{ data: new Float32Array(input.data), shape: input.shape }]);
    await program.dispose();
    let num = 0;
    let den = 0;
    for (let i = 0; i < expected.length; i++) { num += (out[i] - expected[i]) ** 2; den += expected[i] ** 2; }
    return { length: out.length, relL2: Math.sqrt(num / (den || 1)), nan: out.some(Number.isNaN) };
  }, fixture);
  assert.equal(run.length, fixture.expected.length);
  assert.equal(run.nan, false);
  assert.ok(run.relL2 <= TOLERANCE, `${FIXTURE}: rel-L2 ${run.relL2} > ${TOLERANCE}`);
}

/** A truncated program must arrive as PteFormatError (class identity survives minification). */
async function checkCorrupt(page) {
  const corrupt = await page.evaluate(async (pte) => {
    const { loadProgram, PteFormatError, WebpteError } = window.webpte;
    try {
      await loadProgram(new Uint8Array(pte.slice(0, 200)));
      return null;
    } catch (err) {
      return { name: err.name, typed: err instanceof PteFormatError, base: err instanceof WebpteError, message: err.message };
    }
  }, fixture.pte);
  assert.deepEqual([corrupt?.name, corrupt?.typed, corrupt?.base], ['PteFormatError', true, true], JSON.stringify(corrupt));
}

/**
 * SmolLM2 (served under /models/smollm2/): a short greedy generate() and one chat request each
 * way, with the same ids. No reset between requests: each keeps the KV rows of the same prompt.
 */
async function checkModel(page) {
  const gen = await page.evaluate(async ({ prompt, n }) => {
    const model = await window.webpte.loadModel('/models/smollm2/');
    let text = '';
    let done = null;
    for await (const ev of model.generate({ prompt, maxNewTokens: n })) {
      if (ev.type === 'text') text += ev.text;
      else done = ev;
    }
    const request = { messages: [{ role: 'user', content: prompt }], max_tokens: n, temperature: 0 };
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
  const ids = gen.done.tokenIds;
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
  return ids;
}

/**
 * The checks every build of the app must pass, at `url`: the fixture within tolerance, the
 * typed error, with `withModel` the SmolLM2 generation, no page error and no request leaving
 * 127.0.0.1. Pushes timings (ms) to `timings`; returns the greedy ids (or null).
 */
export async function checkApp(t, browser, url, label, { withModel = false, timings = [] } = {}) {
  const app = await openApp(browser, url);
  try {
    const t0 = performance.now();
    await checkFixture(app.page);
    timings.push(`${label}: Python boot + plan + run ${FIXTURE} ${(performance.now() - t0).toFixed(0)}`);
    await checkCorrupt(app.page);
    let ids = null;
    if (withModel) {
      const t1 = performance.now();
      ids = await checkModel(app.page);
      timings.push(`${label}: SmolLM2 load + ${NEW_TOKENS}-token generate + 2 chat completions ${(performance.now() - t1).toFixed(0)}`);
    }
    assert.deepEqual(app.errors, []);
    assert.deepEqual(app.blocked, [], 'requests left 127.0.0.1');
    t.diagnostic(`${label}: ${FIXTURE} within ${TOLERANCE}, PteFormatError typed${ids ? `, greedy ids ${ids}` : ''}`);
    return ids;
  } finally {
    await app.close();
  }
}
