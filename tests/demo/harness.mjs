// Shared set-up of the demo's browser tests: the built site served from 127.0.0.1 with
// optional virtual files, and headless Chromium contexts that block and count every request
// to any other host. Each run lays the site out afresh in its own folder under build/
// (`demo/build.mjs --out`, hard links into dist/ and the model folder), so neither a
// concurrent `npm run build` nor another test run can pull files away mid-test.
// Env: WEBPTE_DEMO_SITE (use a site built already), WEBPTE_DEMO_MODEL (the SmolLM2 folder;
// default: webpte.build.smollm2.default_folder()), WEBPTE_CHROMIUM, WEBPTE_PY,
// WEBPTE_DEMO_VERBOSE=1 (echo the page's console).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { serveStatic } from '../../demo/serve.mjs';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const CHROMIUM = process.env.WEBPTE_CHROMIUM ?? '/usr/bin/chromium';
const PY = process.env.WEBPTE_PY ?? join(ROOT, '.venv/bin/python');
const BASE_ARGS = ['--no-sandbox', '--disable-background-networking', '--disable-component-update',
  '--disable-sync', '--no-first-run', '--disable-quic', '--disable-dev-shm-usage'];

function buildSite() {
  if (process.env.WEBPTE_DEMO_SITE) return { site: resolve(process.env.WEBPTE_DEMO_SITE), own: false };
  const model = process.env.WEBPTE_DEMO_MODEL ?? execFileSync(PY, ['-c',
    'from webpte.build.smollm2 import default_folder; print(default_folder())'], { encoding: 'utf8' }).trim();
  mkdirSync(join(ROOT, 'build'), { recursive: true });
  const site = mkdtempSync(join(ROOT, 'build', 'demo-site-'));
  execFileSync(process.execPath, [join(ROOT, 'demo/build.mjs'), '--model', model, '--out', site],
    { stdio: ['ignore', 'ignore', 'inherit'] });
  return { site, own: true };
}

const built = buildSite();
/** The site's folder: index.html, demo/, sw.js, the library, models/smollm2/. */
export const SITE = built.site;
export const MODEL = join(SITE, 'models/smollm2');

/** Remove the site this run laid out (not one given by WEBPTE_DEMO_SITE). */
export function removeSite() {
  if (built.own) rmSync(SITE, { recursive: true, force: true });
}

export function checkBuilt() {
  for (const f of ['index.js', 'index.html', 'sw.js', 'demo/app.js', 'models/smollm2/webpte_model.json']) {
    if (!existsSync(join(SITE, f))) throw new Error(`${SITE}/${f} is missing: build the site with \`node demo/build.mjs --model DIR --out DIR\``);
  }
}

/**
 * Serve the site (plus `files`: {"/path": Buffer | "/abs/file"}). `standIn` puts the stand-in
 * model API (tests/demo/standin_webpte.js) at /index.js instead of webpte's.
 */
export function serveSite(files = {}, { standIn = false } = {}) {
  const extra = standIn ? { '/index.js': join(ROOT, 'tests/demo/standin_webpte.js') } : {};
  return serveStatic({ root: SITE, files: { ...extra, ...files }, cache: 'no-store' });
}

/**
 * Headless Chromium; `webgpu: false` leaves out --enable-unsafe-webgpu, `camera: true` adds
 * Chromium's synthetic camera (a test pattern) with the permission prompt answered yes.
 */
export function launch({ webgpu = true, camera = false } = {}) {
  const args = [...BASE_ARGS];
  if (webgpu) args.push('--enable-unsafe-webgpu');
  if (camera) args.push('--use-fake-device-for-media-stream', '--use-fake-ui-for-media-stream');
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args });
}

/**
 * A context whose requests to anything but `site.url` are blocked and recorded in
 * `context.blocked`. Service workers are blocked unless `serviceWorkers: 'allow'`.
 */
export async function guardedContext(browser, site, { serviceWorkers = 'block', permissions = [] } = {}) {
  const context = await browser.newContext({ serviceWorkers, permissions, viewport: { width: 900, height: 1000 } });
  context.blocked = [];
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith(`${site.url}/`)) return route.continue();
    context.blocked.push(url);
    return route.abort('blockedbyclient');
  });
  return context;
}

/** A page of `context` with console errors echoed (all of it with WEBPTE_DEMO_VERBOSE=1). */
export async function openDemo(context, site, path = '/') {
  const page = await context.newPage();
  page.on('console', (m) => {
    if (process.env.WEBPTE_DEMO_VERBOSE === '1' || m.type() === 'error') console.error(`[page ${m.type()}] ${m.text()}`);
  });
  page.on('pageerror', (err) => console.error(`[page exception] ${err.message}`));
  await page.goto(`${site.url}${path}`);
  await page.waitForFunction(() => document.body.dataset.state, null, { timeout: 60_000 });
  return page;
}

/** Requests the server saw for model files (.pte, .bin, tokenizer, meta), by path. */
export function modelHits(site) {
  return [...site.hits.keys()].filter((p) => /\.(pte|bin)$|\/tokenizer\/|webpte_model\.json|vlm_meta\.json/.test(p));
}

/** Load the model of the chosen source and wait until the page is ready or shows an error. */
export async function loadAndWait(page, { timeout = 600_000 } = {}) {
  await page.click('#load');
  await page.waitForFunction(() => !document.getElementById('chat').hidden
    || !document.getElementById('error').hidden, null, { timeout, polling: 250 });
}

/** Ask `question`; resolves to {text, meta, prefill, decode} once the answer is complete. */
export async function ask(page, question, { timeout = 600_000, maxNewTokens } = {}) {
  if (maxNewTokens) await page.$eval('#max-new-tokens', (el, v) => { el.value = v; }, String(maxNewTokens));
  const before = await page.locator('#transcript .assistant').count();
  await page.fill('#question', question);
  await page.click('#ask');
  await page.waitForFunction((n) => {
    const turns = document.querySelectorAll('#transcript .assistant');
    return turns.length > n && !turns[n].classList.contains('streaming');
  }, before, { timeout, polling: 250 });
  return page.evaluate((n) => {
    const turn = document.querySelectorAll('#transcript .assistant')[n];
    return {
      text: turn.querySelector('.text').textContent,
      meta: turn.querySelector('.meta').textContent,
      failed: turn.classList.contains('failed'),
      prefill: document.getElementById('stat-prefill').textContent,
      decode: document.getElementById('stat-decode').textContent,
      error: document.getElementById('error').hidden ? null : document.getElementById('error').dataset.error,
    };
  }, before);
}

/** The error box as data, or null when hidden. */
export function shownError(page) {
  return page.evaluate(() => {
    const box = document.getElementById('error');
    if (box.hidden) return null;
    return {
      name: box.dataset.error, title: document.getElementById('error-title').textContent,
      message: document.getElementById('error-message').textContent,
      todo: document.getElementById('error-todo').textContent, section: box.parentElement.id,
    };
  });
}
