// Tier 2, the npm package with webpack and esbuild (Vite: bundler.test.mjs): the same minimal
// app (tests/bundler/app/) with the same packed tarball installed offline, built for production
// (minified) by webpack 5 with ES module output (tests/bundler/app/webpack.config.js) and by esbuild
// with the package's dist/ copied beside the bundle (tests/bundler/app/esbuild.mjs), each
// served by a plain static server. In headless Chromium: the fixture program within tolerance
// and a truncated program as PteFormatError; no request may leave 127.0.0.1. SmolLM2 generation
// through a bundle is bundler.test.mjs's (Vite): here it took 94 s for esbuild (a loaded machine).
// WEBPTE_WEBPACK_DEV=1 also checks webpack's development build (eval'd modules; about 10 s more).
// Needs `npm run build` (dist/).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import webpack from 'webpack';
import { ROOT, checkApp, installApp, launchBrowser } from '../bundler/harness.mjs';
import { serveStatic } from './server.mjs';

const WORK = join(ROOT, 'build/bundlers');
const APP = join(WORK, 'app');
const LONG = { timeout: 300_000 };
// The page a user writes: both bundles are ES modules.
const PAGE = (src) => Buffer.from(`<!doctype html>\n<meta charset="utf-8">\n<title>webpte</title>\n<script type="module" src="${src}"></script>\n`);

let browser;
const timings = [];

before(async () => {
  const t0 = performance.now();
  installApp(APP);
  timings.push(`pack (or reuse) + offline install ${(performance.now() - t0).toFixed(0)}`);
  browser = await launchBrowser();
});

after(async () => {
  for (const line of timings) console.log(`# timing (ms): ${line}`);
  await browser?.close();
});

/** Serve a built app's folder with its page and run the checks. */
async function checkBuilt(t, label, outDir, page) {
  const server = await serveStatic({}, { root: outDir, files: { '/': page, '/index.html': page } });
  try {
    await checkApp(t, browser, server.url, label, { timings });
  } finally {
    await server.close();
  }
}

function webpackBuild(outDir, mode) {
  return import(join(APP, 'webpack.config.js')).then(({ default: config }) => new Promise((res, rej) => {
    const compiler = webpack({ ...config, mode, context: APP, output: { ...config.output, path: outDir, clean: true } });
    compiler.run((err, stats) => compiler.close(() => {
      if (err) return rej(err);
      if (stats.hasErrors()) return rej(new Error(stats.toString({ all: false, errors: true })));
      return res(stats);
    }));
  }));
}

describe('the packed package with webpack and esbuild', () => {
  for (const mode of process.env.WEBPTE_WEBPACK_DEV === '1' ? ['development', 'production'] : ['production']) {
    test(`webpack 5 (${mode}${mode === 'production' ? ', minified' : ''})`, LONG, async (t) => {
      const out = join(WORK, `webpack-${mode}`);
      const t0 = performance.now();
      const stats = await webpackBuild(out, mode);
      timings.push(`webpack build (${mode}) ${(performance.now() - t0).toFixed(0)}`);
      const emitted = Object.keys(stats.compilation.assets);
      assert.ok(emitted.some((f) => f.endsWith('.wasm')) && emitted.some((f) => f.endsWith('.whl')), `webpack emitted ${emitted}`);
      await checkBuilt(t, `webpack ${mode}`, out, PAGE('main.mjs'));
    });
  }

  test('esbuild (minified, dist/ copied beside the bundle)', LONG, async (t) => {
    const out = join(WORK, 'esbuild');
    const t0 = performance.now();
    const { buildApp } = await import(join(APP, 'esbuild.mjs'));
    await buildApp({ root: APP, outdir: out });
    timings.push(`esbuild build + copy ${(performance.now() - t0).toFixed(0)}`);
    await checkBuilt(t, 'esbuild', out, PAGE('main.js'));
  });
});
