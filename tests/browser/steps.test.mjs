// Host round trips of a conversation in the page (tests/test_prefill_submit.py natively): with
// the tiny VLM's decoder (tests/fixtures/tiny_vlm), every decode step is one submit that creates no GPU
// buffer and no bind group and reads back only the sampled readout: a 4-byte id when greedy, 64
// ids and their logits when sampling top-k, the vocabulary's logits only when sampling without
// top-k. The prompt's windows go in the submits the worker sizes by time (done.prefillSubmits),
// each reading back the same readout (one may grow the buffer the windows' inputs share: the
// submits' sizes follow the machine's speed). Counted by the worker over its devices (runtimeInfo():
// created counts createBuffer / createBindGroup, traffic queue.submit and the bytes executors read
// from mapped staging buffers, calls what each executor call saw of them while it ran).
// Needs `npm run build` (dist/).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSuitePage } from './browser.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const TINY_VLM = join(ROOT, 'tests/fixtures/tiny_vlm');
// Its text half (the same files, the meta without the vision program): the test asks no image,
// and not planning the vision program saves load time.
const TEXT = (() => {
  const dir = join(ROOT, 'build/web-test/tiny-vlm-text');
  const meta = JSON.parse(readFileSync(join(TINY_VLM, 'webpte_model.json'), 'utf8'));
  delete meta.sha256[meta.vision];
  delete meta.vision;
  rmSync(dir, { recursive: true, force: true });
  for (const file of Object.keys(meta.sha256)) {
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    symlinkSync(join(TINY_VLM, file), join(dir, file));
  }
  writeFileSync(join(dir, 'webpte_model.json'), JSON.stringify(meta));
  return dir;
})();
const PY = process.env.WEBPTE_PY ?? join(ROOT, '.venv/bin/python');
// The width of the decoder's logits, from its plan (as Python makes it for the page).
const VOCAB = Number(execFileSync(PY, ['-c', 'import sys; from webpte.pte import read_program; '
  + 'from webpte.program import plan_method; p = plan_method(read_program(open(sys.argv[1], "rb").read()), '
  + '"forward", frozenset()); print(p.outputs[0].shape[-1])', join(TINY_VLM, 'decoder_q8.pte')], { encoding: 'utf8' }));
const CANDIDATES = 64; // py/webpte/kernels/sampling/topk.py: the top-k readout's k
const QUESTION = 'Say something long enough to need several windows of four rows.';
const N_NEW = 6;
const LONG = { timeout: 300_000 };
assert.ok(existsSync(join(ROOT, 'dist/index.js')), 'dist/ is missing: run `npm run build` first');

let s;
before(async () => {
  s = await openSuitePage({ '/dist/': join(ROOT, 'dist'), '/suite/': join(ROOT, 'tests/browser'), '/tiny-text/': TEXT });
  const err = await s.page.evaluate(() => suite.errorOf((async () => {
    window.model = await suite.webpte.loadModel('/tiny-text/');
  })()));
  assert.equal(err, null, JSON.stringify(err));
});

after(async () => {
  await s?.page.evaluate(() => window.model?.dispose());
  await s?.close();
});

/**
 * One turn of `options` after an identical warm one (load-time caches settle), from a reset
 * conversation each time: the counters' growth over the measured turn, the executor calls it
 * made, and both turns' ids.
 */
function countedTurn(options) {
  return s.page.evaluate(async ({ question, options }) => {
    const turn = async () => {
      let done = null;
      for await (const ev of window.model.generate({ prompt: question, ...options })) if (ev.type === 'done') done = ev;
      return done;
    };
    await window.model.reset();
    const warm = await turn();
    await window.model.reset();
    const start = await suite.webpte.runtimeInfo();
    const done = await turn();
    const end = await suite.webpte.runtimeInfo();
    const grew = (what) => Object.fromEntries(Object.keys(end[what]).map((k) => [k, end[what][k] - start[what][k]]));
    const last = start.calls.at(-1)?.n ?? 0;
    return { warm: warm.tokenIds, done, created: grew('created'), traffic: grew('traffic'), calls: end.calls.filter((c) => c.n > last) };
  }, { question: QUESTION, options });
}

/** The measured turn's counts: its prefill submits, then one call per fed token with `bytes` read. */
function assertSteps(out, bytes) {
  const { done, calls } = out;
  assert.deepEqual(done.tokenIds, out.warm, 'the same options gave other tokens');
  assert.ok(done.prefillWindows > 2, `the prompt should need several windows, it took ${done.prefillWindows}`);
  assert.equal(done.stopReason, 'max_new_tokens');
  const fed = done.newTokens; // every generated token went through the decoder (none stopped it)
  assert.equal(calls.length, done.prefillSubmits + fed, JSON.stringify(calls));
  const prefill = calls.slice(0, done.prefillSubmits);
  assert.equal(prefill.reduce((n, c) => n + c.windows, 0), done.prefillWindows, 'the prefill calls ran every window');
  for (const c of prefill) assert.deepEqual([c.submits, c.readBytes, c.bindGroups], [1, bytes, 0], JSON.stringify(c));
  const steps = calls.slice(done.prefillSubmits).map(({ windows, submits, readBytes, buffers, bindGroups }) => ({ windows, submits, readBytes, buffers, bindGroups }));
  const step = { windows: 1, submits: 1, readBytes: bytes, buffers: 0, bindGroups: 0 };
  assert.deepEqual(steps, Array(fed).fill(step), `each of the ${fed} decode steps: one submit, nothing made, ${bytes} bytes read`);
  // Nothing happened on the devices between the calls either.
  const sum = (key) => calls.reduce((n, c) => n + c[key], 0);
  assert.deepEqual(out.traffic, { submits: sum('submits'), readBytes: sum('readBytes') });
  assert.deepEqual(out.created, { buffers: sum('buffers'), bindGroups: 0 });
  return steps.length;
}

test('greedy: one submit per decode step, nothing created, the 4-byte id read back', LONG, async () => {
  assert.equal(assertSteps(await countedTurn({ maxNewTokens: N_NEW }), 4), N_NEW);
});

test('top-k sampling: one submit per decode step, nothing created, the 64 candidates read back', LONG, async () => {
  assert.equal(assertSteps(await countedTurn({ maxNewTokens: N_NEW, temperature: 0.9, topK: 20, seed: 5 }), 8 * CANDIDATES), N_NEW);
});

test('sampling without top-k reads the whole row of logits per decode step', LONG, async () => {
  assert.equal(assertSteps(await countedTurn({ maxNewTokens: 2, temperature: 0.9, seed: 5 }), 4 * VOCAB), 2);
});
