// Tier 2, difftest: a sample of the kept difftest programs (tests/fixtures/difftest/page,
// exported by tools/export_difftest.py: generated programs that once failed, one per bug)
// loaded in headless Chromium (SwiftShader) and run call by call against eager PyTorch's
// outputs (rel-L2 1e-4, integers exact in effect). Goldens come from
// tests/browser/make_architecture_goldens.py. Needs `npm run build` (dist/) and the venv.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSuitePage } from './browser.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const GOLDEN = join(ROOT, 'build/web-test/difftest');
const PROGRAMS = join(ROOT, 'tests/fixtures/difftest/page');
const PY = process.env.WEBPTE_PY ?? join(ROOT, '.venv/bin/python');
const LONG = { timeout: 120_000 };

assert.ok(existsSync(join(ROOT, 'dist/index.js')), 'dist/ is missing: run `npm run build` first');
execFileSync(PY, [join(ROOT, 'tests/browser/make_architecture_goldens.py'), GOLDEN, PROGRAMS],
  { stdio: ['ignore', 'ignore', 'inherit'] });
const manifest = JSON.parse(readFileSync(join(GOLDEN, 'manifest.json'), 'utf8'));

let s;

before(async () => {
  s = await openSuitePage({
    '/dist/': join(ROOT, 'dist'), '/suite/': join(ROOT, 'tests/browser'),
    '/golden/': GOLDEN, '/programs/': PROGRAMS,
  });
});

after(async () => {
  await s?.close();
});

describe('kept difftest programs in the page', () => {
  for (const entry of manifest.programs) {
    test(entry.name, LONG, async () => {
      const result = await s.page.evaluate(async (e) => {
        let program;
        const err = await suite.errorOf((async () => {
          program = await suite.webpte.loadProgram(`/programs/${e.pte}`, { poison: true });
        })());
        if (err) return { error: err };
        try {
          return await suite.checkCalls(program, e);
        } finally {
          await program.dispose();
        }
      }, entry);
      assert.equal(result.error, undefined, `${entry.name} failed to load: ${JSON.stringify(result.error)}`);
      assert.equal(result.outputCount, entry.calls[0].outputs.length);
      const outs = result.calls.flat();
      assert.ok(outs.every((o) => o.ok), JSON.stringify(outs));
    });
  }

  test('no request left 127.0.0.1', () => {
    assert.deepEqual(s.blocked, []);
  });
});
