// Tier 2, external data: programs whose constants live in `.ptd` files (tests/fixtures/ptd,
// tools/export_ptd.py) loaded in headless Chromium with loadProgram(src, {data}): the program
// way (constants by name) and the delegate way (by sha256, over two files, one given as
// bytes) against eager PyTorch, URLs preflighted from their ranges; no data file, another
// export's file and a file that is not a .ptd are ExternalDataErrors naming the key or the file. Needs `npm run build` (dist/) and
// the venv (the fixture's npz is read by Python).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSuitePage } from './browser.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const PY = process.env.WEBPTE_PY ?? join(ROOT, '.venv/bin/python');
const LONG = { timeout: 300_000 };

assert.ok(existsSync(join(ROOT, 'dist/index.js')), 'dist/ is missing: run `npm run build` first');
const reference = JSON.parse(execFileSync(PY, ['-c', `
import json, numpy as np
z = np.load("${join(ROOT, 'tests/fixtures/ptd/ptd.npz')}")
print(json.dumps({k: z[k].ravel().tolist() for k in ("input_0", "output_0")} | {"shape": list(z["input_0"].shape)}))
`], { encoding: 'utf8' }));

let s;

before(async () => {
  s = await openSuitePage({ '/dist/': join(ROOT, 'dist'), '/suite/': join(ROOT, 'tests/browser'), '/ptd/': join(ROOT, 'tests/fixtures/ptd') });
});

after(async () => {
  await s?.close();
});

/** Load `pte` with `data` (URLs; `asBytes` fetches them in the page first), run the fixture's
 * input once: {outputs, stats} or {error: {name, message, key, file, isClass}}. */
function loadAndRun(pte, data, { asBytes = [] } = {}) {
  return s.page.evaluate(async ({ pte, data, asBytes, ref }) => {
    const { webpte } = suite;
    const given = await Promise.all(data.map(async (u) => (asBytes.includes(u) ? (await fetch(u)).arrayBuffer() : u)));
    let program;
    try {
      program = await webpte.loadProgram(pte, { data: given, poison: true });
      const [y] = await program.run([{ data: Float32Array.from(ref.input_0), shape: ref.shape }]);
      return { outputs: Array.from(y), stats: program.stats };
    } catch (err) {
      return { error: { name: err.name, message: err.message, key: err.key ?? null, file: err.file ?? null, isClass: err instanceof webpte.ExternalDataError } };
    } finally {
      await program?.dispose();
    }
  }, { pte, data, asBytes, ref: reference });
}

function assertClose(got, want) {
  assert.equal(got.length, want.length);
  got.forEach((g, i) => assert.ok(Math.abs(g - want[i]) <= 1e-5 + 1e-4 * Math.abs(want[i]), `element ${i}: ${g} vs ${want[i]}`));
}

describe('external data files in the page', () => {
  test('program constants kept by name in a .ptd match eager', LONG, async () => {
    const r = await loadAndRun('/ptd/program.pte', ['/ptd/program.ptd']);
    assert.equal(r.error, undefined, JSON.stringify(r.error));
    assertClose(r.outputs, reference.output_0);
    assert.deepEqual(r.stats.data_files.map((f) => f.file.split('/').pop()), ['program.ptd']);
    // URLs: planned from the .pte's and the .ptd's ranges before either was downloaded.
    assert.equal(r.stats.preflight?.skipped, undefined, JSON.stringify(r.stats.preflight));
    assert.equal(r.stats.preflight.data_fetched.length, 1);
  });

  test('delegate constants over two .ptd files (one given as bytes) match eager', LONG, async () => {
    const r = await loadAndRun('/ptd/delegate.pte', ['/ptd/delegate_1.ptd', '/ptd/delegate_0.ptd'], { asBytes: ['/ptd/delegate_0.ptd'] });
    assert.equal(r.error, undefined, JSON.stringify(r.error));
    assertClose(r.outputs, reference.output_0);
    assert.ok(r.stats.constant_bytes > 0);
    assert.equal(r.stats.preflight, null, 'a data file given as bytes: no preflight');
  });

  test('no data file: an ExternalDataError naming the key', LONG, async () => {
    const r = await loadAndRun('/ptd/program.pte', []);
    assert.ok(r.error?.isClass, JSON.stringify(r));
    assert.equal(r.error.key, 'fc.weight');
    assert.match(r.error.message, /'fc\.weight'.*none was given/);
  });

  test("another export's data file: an ExternalDataError naming the key and the file", LONG, async () => {
    const r = await loadAndRun('/ptd/program.pte', ['/ptd/other.ptd']);
    assert.ok(r.error?.isClass, JSON.stringify(r));
    assert.equal(r.error.key, 'fc.weight');
    assert.match(r.error.file, /\/ptd\/other\.ptd$/);
    const missing = await loadAndRun('/ptd/delegate.pte', ['/ptd/delegate_0.ptd']);
    assert.ok(missing.error?.isClass && missing.error.key, JSON.stringify(missing));
    assert.match(missing.error.message, /none of the data files given \(.*delegate_0\.ptd\)/);
  });

  test('a file that is not a .ptd: an ExternalDataError naming it', LONG, async () => {
    const r = await loadAndRun('/ptd/program.pte', ['/ptd/program.pte']);
    assert.ok(r.error?.isClass, JSON.stringify(r));
    assert.match(r.error.file, /\/ptd\/program\.pte$/);
    assert.match(r.error.message, /not a well-formed \.ptd/);
  });

  test('no request left 127.0.0.1', () => {
    assert.deepEqual(s.blocked, []);
  });
});
