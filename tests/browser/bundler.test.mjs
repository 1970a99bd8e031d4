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
import { createServer as netServer } from 'node:net';
import { join } from 'node:path';
import { build, createServer, preview } from 'vite';
import { HAS_MODEL, MODEL, ROOT, TARBALL, VERSION, checkApp, installApp, launchBrowser } from '../bundler/harness.mjs';
import { serveStatic } from './server.mjs';

const WORK = join(ROOT, 'build/bundler');
const APP = join(WORK, 'app');
const LONG = { timeout: 300_000 };

function freePort() {
  return new Promise((res, rej) => {
    const s = netServer().listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => res(port)); });
    s.on('error', rej);
  });
}

let modelServer = null;
let browser;
const timings = [];

before(async () => {
  const t0 = performance.now();
  installApp(APP);
  timings.push(`pack (or reuse) + offline install ${(performance.now() - t0).toFixed(0)}`);
  if (HAS_MODEL) modelServer = await serveStatic({ '/models/smollm2/': MODEL });
  browser = await launchBrowser();
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

describe('the packed package in a Vite app', () => {
  test('npm pack ships every file the page needs', () => {
    const listing = execFileSync('tar', ['-tzf', TARBALL], { encoding: 'utf8' }).split('\n');
    for (const f of ['dist/index.js', 'dist/worker.js', 'dist/assets.js', 'dist/pyodide/pyodide.asm.wasm',
      'dist/pyodide/python_stdlib.zip', 'dist/wheels/pyodide-lock.json', `dist/wheels/webpte-${VERSION}-py3-none-any.whl`,
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
      await checkApp(t, browser, `http://127.0.0.1:${port}`, 'dev', { timings });
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
      const ids = await checkApp(t, browser, `http://127.0.0.1:${port}`, 'production', { withModel: HAS_MODEL, timings });
      if (!HAS_MODEL) t.diagnostic('no SmolLM2 folder (make model): generation not checked');
      else t.diagnostic(`SmolLM2 greedy ids ${ids}: generate() = chat (stream and not)`);
    } finally {
      await new Promise((r) => server.httpServer.close(r));
    }
  });
});
