// Tier 2, architectures: the published image models exported by tools/export_architectures.py
// (MobileNetV3-small, ResNet-18, a ViT; tests/fixtures/architectures) loaded in headless
// Chromium (SwiftShader) and run once each, the logits against eager PyTorch's with the
// native tolerance (rel-L2 1e-4, no NaN). Goldens come from
// tests/browser/make_architecture_goldens.py. Needs `npm run build` (dist/) and the venv.
//
// Env: WEBPTE_ARCHITECTURES=DIR runs the programs of another folder (e.g. the paper-size ones
// of `python tools/export_architectures.py --full --out DIR`).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSuitePage } from './browser.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const GOLDEN = join(ROOT, 'build/web-test/architectures');
const PY = process.env.WEBPTE_PY ?? join(ROOT, '.venv/bin/python');
const LONG = { timeout: 600_000 };

assert.ok(existsSync(join(ROOT, 'dist/index.js')), 'dist/ is missing: run `npm run build` first');
execFileSync(PY, [join(ROOT, 'tests/browser/make_architecture_goldens.py'), GOLDEN,
  ...(process.env.WEBPTE_ARCHITECTURES ? [resolve(process.env.WEBPTE_ARCHITECTURES)] : [])],
{ stdio: ['ignore', 'ignore', 'inherit'] });
const manifest = JSON.parse(readFileSync(join(GOLDEN, 'manifest.json'), 'utf8'));

let s;
const timings = [];

before(async () => {
  s = await openSuitePage({
    '/dist/': join(ROOT, 'dist'), '/suite/': join(ROOT, 'tests/browser'),
    '/golden/': GOLDEN, '/arch/': manifest.dir,
  });
});

after(async () => {
  for (const line of timings) console.log(`# timing (ms): ${line}`);
  await s?.close();
});

describe(`published architectures in the page (${manifest.dir})`, () => {
  for (const entry of manifest.programs) {
    test(entry.name, LONG, async () => {
      const result = await s.page.evaluate(async (e) => {
        let program;
        const err = await suite.errorOf((async () => {
          program = await suite.webpte.loadProgram(`/arch/${e.pte}`, { poison: true });
        })());
        if (err) return { error: err };
        try {
          return { ...(await suite.checkCalls(program, e)), stats: program.stats };
        } finally {
          await program.dispose();
        }
      }, entry);
      assert.equal(result.error, undefined, `${entry.name} failed to load: ${JSON.stringify(result.error)}`);
      const outs = result.calls.flat();
      assert.ok(outs.every((o) => o.ok), JSON.stringify(outs));
      const st = result.stats;
      timings.push(`${entry.name}: plan ${st.plan_ms.toFixed(0)}, upload ${st.upload_ms.toFixed(0)} (pipelines `
        + `${st.pipelines_ms.toFixed(0)} for ${st.kernels} kernels), run ${result.run_ms.map((x) => x.toFixed(0)).join(', ')}; `
        + `rel-L2 ${outs.map((o) => o.relL2.toExponential(2)).join(', ')}`);
    });
  }

  test('no request left 127.0.0.1', () => {
    assert.deepEqual(s.blocked, []);
  });
});
