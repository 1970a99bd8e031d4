// Tier 2: ExecuTorch's WebGPU op-test catalog in the page (headless Chromium, SwiftShader),
// compared as `webpte conformance` compares natively (py/webpte/conformance.py, here
// tests/browser/catalog_compare.js): outputs poisoned at load, the shape exactly (the method's
// output shape; a dynamic-shape call with other dims checks its element count), then bool /
// int8 / int64 goldens exactly, float32 goldens with |actual - golden| <= atol + rtol * |golden|.
// Every case must pass. The catalogs are the committed subset (tests/fixtures/op_catalog) and
// the dynamic-shape case (tests/fixtures/dynamic) unless WEBPTE_CATALOG names other folders
// (':'-separated; `make conformance-web` runs the full one). The per-case results go to
// out/catalog-page.json; the table is printed to stdout.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSuitePage } from './browser.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const CATALOGS = (process.env.WEBPTE_CATALOG ?? [join(ROOT, 'tests/fixtures/op_catalog'), join(ROOT, 'tests/fixtures/dynamic')].join(':'))
  .split(':').filter(Boolean).map((d) => resolve(d));
const LONG = { timeout: 600_000 };
const byPte = new Map();
CATALOGS.forEach((dir, k) => {
  for (const e of JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'))) {
    const key = `${k}/${e.pte}`;
    if (!byPte.has(key)) byPte.set(key, []);
    byPte.get(key).push({ ...e, mount: `/catalog${k}/` });
  }
});

let page;
let blocked;
let close;
const results = [];

before(async () => {
  ({ page, blocked, close } = await openSuitePage({
    '/dist/': join(ROOT, 'dist'), '/suite/': join(ROOT, 'tests/browser'),
    ...Object.fromEntries(CATALOGS.map((dir, k) => [`/catalog${k}/`, dir])),
  }));
});

after(async () => {
  const ops = new Map();
  for (const r of results) {
    const row = ops.get(r.op) ?? { cases: 0, pass: 0, first: null };
    row.cases += 1;
    if (r.status === 'pass') row.pass += 1;
    else row.first ??= `${r.case}: ${r.status} ${r.detail}`.slice(0, 160);
    ops.set(r.op, row);
  }
  const lines = [...ops.entries()].sort().map(([op, r]) => `${op.padEnd(34)} ${String(r.cases).padStart(5)} ${String(r.pass).padStart(5)}  ${r.first ?? ''}`);
  const passing = [...ops.values()].filter((r) => r.pass === r.cases).length;
  const cases = results.filter((r) => r.status === 'pass').length;
  console.log(['# page catalog (SwiftShader)', `${'op'.padEnd(34)} cases  pass  failing`, ...lines,
    `summary (page): ${passing}/${ops.size} ops and ${cases}/${results.length} cases pass`].map((l) => `# ${l}`).join('\n'));
  mkdirSync(join(ROOT, 'out'), { recursive: true });
  writeFileSync(join(ROOT, 'out/catalog-page.json'), JSON.stringify({ catalogs: CATALOGS, results }, null, 1));
  await close?.();
});

describe(`the op catalog in the page (${CATALOGS.join(', ')})`, () => {
  for (const [pte, cases] of byPte) {
    test(pte, LONG, async () => {
      const out = await page.evaluate(async (group) => {
        const ARRAYS = { float32: Float32Array, int32: Int32Array, int64: BigInt64Array, int8: Int8Array, bool: Int8Array };
        const { compareOutput } = await import('/suite/catalog_compare.js');
        const first = group[0];
        const raw = async (spec) => {
          const resp = await fetch(`${first.mount}${spec.path}`);
          if (!resp.ok) throw new Error(`${spec.path}: HTTP ${resp.status}`);
          return new ARRAYS[spec.dtype](await resp.arrayBuffer());
        };
        let outputs;
        let shapes;
        try {
          const program = await suite.webpte.loadProgram(`${first.mount}${first.pte}`, { poison: true });
          try {
            const inputs = await Promise.all(first.inputs.map(async (x) => {
              const data = await raw(x);
              return { data: x.dtype === 'bool' ? new Uint8Array(data.buffer) : data, shape: x.shape };
            }));
            outputs = await program.run(inputs);
            // The method's output shapes hold for a call with its input shapes; run() does not
            // report a dynamic-shape method's specialised ones.
            const own = first.inputs.every((x, i) => program.inputs[i].shape.length === x.shape.length
              && program.inputs[i].shape.every((d, j) => d === x.shape[j]));
            shapes = program.outputs.map((o) => (own ? o.shape : null));
          } finally {
            await program.dispose();
          }
        } catch (err) {
          const status = err?.name === 'UnsupportedOpError' ? 'unsupported' : (err instanceof suite.webpte.WebpteError ? 'error' : 'crash');
          return group.map((e) => ({ op: e.op, case: e.case, status, detail: `${err?.name}: ${err?.message}`.slice(0, 400) }));
        }
        return Promise.all(group.map(async (e) => {
          const golden = await raw(e.golden);
          const idx = e.golden.output_index ?? 0;
          const { status, detail, first: firstBad } = compareOutput(outputs[idx], shapes[idx] ?? null, golden, e.golden, e.atol ?? 1e-3, e.rtol ?? 1e-3);
          return { op: e.op, case: e.case, status, detail, first: firstBad };
        }));
      }, cases);
      results.push(...out);
      const failing = out.filter((r) => r.status !== 'pass');
      assert.deepEqual(failing, [], failing.map((r) => `${r.op}/${r.case}: ${r.status} ${r.detail} ${JSON.stringify(r.first ?? [])}`).join('\n'));
    });
  }

  test('no request left 127.0.0.1', () => {
    assert.deepEqual(blocked, []);
  });
});
