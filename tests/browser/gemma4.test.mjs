// Tier 2, the tiny Gemma 4 model folder (tests/fixtures/gemma4/model: ring-cache sliding
// layers, Gemma's turn format) in headless Chromium through loadModel / generate and
// chat.completions.create. Greedy ids in the page must equal the native GPU's and the numpy
// interpreter's (tests/fixtures/gemma4/chat_expected.json, written by
// tests/browser/make_gemma4_generations.py and checked against both by tests/test_gemma4_chat.py),
// and the page must make the host's reuse decisions: a follow-up across the ring keeps the rows
// the ring still holds, a turn after a long stripped answer is fed from position 0. Images are
// known by content (the tiny VLM, tests/fixtures/tiny_vlm): the same question about another
// picture keeps only the rows before it and gives the from-scratch answer. Needs dist/.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSuitePage } from './browser.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const FOLDER = join(ROOT, 'tests/fixtures/gemma4/model');
const LONG = { timeout: 300_000 };

assert.ok(existsSync(join(ROOT, 'dist/index.js')), 'dist/ is missing: run `npm run build` first');
const CHANGING = join(ROOT, 'build/web-test/changing'); // a same-origin image whose content changes
mkdirSync(CHANGING, { recursive: true });
copyFileSync(join(ROOT, 'tests/fixtures/tiny_vlm/picture.png'), join(CHANGING, 'pic.png'));
const native = JSON.parse(readFileSync(join(ROOT, 'tests/fixtures/gemma4/chat_expected.json'), 'utf8'));
// Score margin (the logits are O(10)) within which another driver's float sums may pick the
// runner-up: only there may the page's ids leave the native ones, and not after.
const NEAR_TIE = 0.02;

let s;
before(async () => {
  s = await openSuitePage({
    '/dist/': join(ROOT, 'dist'), '/suite/': join(ROOT, 'tests/browser'), '/gemma4/': FOLDER,
    '/tiny-vlm/': join(ROOT, 'tests/fixtures/tiny_vlm'), '/changing/': CHANGING,
  });
  const err = await s.page.evaluate(async () => suite.errorOf((async () => { window.model = await suite.webpte.loadModel('/gemma4/'); })()));
  assert.equal(err, null, JSON.stringify(err));
});
after(async () => { await s?.close(); });

/** The page's ids against the native ones: equal, or equal up to a genuine native near-tie. */
function sameIds(t, got, want, what) {
  assert.deepEqual(want.reference_token_ids, want.token_ids, `${what}: native GPU and interpreter differ`);
  const at = got.tokenIds.findIndex((id, k) => id !== want.token_ids[k]);
  if (at >= 0 && want.gaps[at] <= NEAR_TIE) {
    assert.deepEqual(got.tokenIds.slice(0, at), want.token_ids.slice(0, at), what);
    t.diagnostic(`${what}: near-tie at token ${at} (native margin ${want.gaps[at].toFixed(4)})`);
    return false;
  }
  assert.deepEqual(got.tokenIds, want.token_ids, `${what}: page ${JSON.stringify(got.tokenIds)}`);
  return true;
}

describe('the tiny Gemma 4 folder chats in the page with the native ids', () => {
  test('the folder loads: Gemma turn format, 128 positions, window plan', async () => {
    const info = await s.page.evaluate(() => ({ name: window.model.name, maxContext: window.model.maxContext, vision: window.model.hasVision }));
    assert.deepEqual(info, { name: 'gemma4-tiny-random', maxContext: 128, vision: false });
  });

  native.conversations.filter((c) => !c.history.length).forEach((conv, i) => {
    test(`generate() conversation ${i + 1}: ${conv.turns.map((x) => JSON.stringify(x.prompt)).join(' then ')}`, LONG, async (t) => {
      const got = await s.page.evaluate(async ({ turns, penalty }) => {
        await window.model.reset();
        const out = [];
        for (const { prompt, max_new_tokens: maxNewTokens } of turns) {
          let done = null;
          for await (const ev of window.model.generate({ prompt, maxNewTokens, repetitionPenalty: penalty })) if (ev.type === 'done') done = ev;
          out.push(done);
        }
        return out;
      }, { turns: conv.turns, penalty: conv.repetition_penalty });
      for (const [j, g] of got.entries()) {
        const want = conv.turns[j];
        assert.equal(g.promptRows, want.prompt_rows, `turn ${j + 1} prompt rows`);
        assert.equal(g.reusedRows, want.reused_rows, `turn ${j + 1} reused rows (native ${want.reused_rows})`);
        assert.equal(g.computedRows, want.computed_rows, `turn ${j + 1} computed rows`);
        if (!sameIds(t, g, want, `turn ${j + 1} (${want.prompt})`)) break;
        assert.equal(g.stopReason, want.stop_reason);
      }
    });
  });

  native.conversations.filter((c) => c.history.length).forEach((conv) => {
    test('chat.completions.create with a given history gives the native ids', LONG, async (t) => {
      const [want] = conv.turns;
      const got = await s.page.evaluate(async ({ history, prompt, max, penalty }) => {
        await window.model.reset();
        const messages = [...history.map(([role, content]) => ({ role, content })), { role: 'user', content: prompt }];
        const c = await window.model.chat.completions.create({ messages, max_tokens: max, temperature: 0, repetition_penalty: penalty });
        return c.webpte.tokenIds ? { ...c.webpte, promptRows: c.usage.prompt_tokens } : c;
      }, { history: conv.history, prompt: want.prompt, max: want.max_new_tokens, penalty: conv.repetition_penalty });
      assert.equal(got.promptRows, want.prompt_rows);
      sameIds(t, got, want, `chat (${want.prompt})`);
    });
  });
});

let otherAnswer = null; // the inverted picture and its from-scratch ids, from the first image test
describe('which image a turn held (the tiny VLM)', () => {
  test('the same text about another picture reuses only the rows before it and answers from scratch; the same picture reuses its rows', LONG, async () => {
    const tiny = JSON.parse(readFileSync(join(ROOT, 'tests/fixtures/tiny_vlm/expected.json'), 'utf8'));
    const question = tiny.questions[0];
    const out = await s.page.evaluate(async ({ question, max }) => {
      const model = await suite.webpte.loadModel('/tiny-vlm/');
      const asDataURL = (blob) => new Promise((res) => { const r = new FileReader(); r.onload = () => res(r.result); r.readAsDataURL(blob); });
      try {
        const picture = await (await fetch('/tiny-vlm/picture.png')).blob();
        const bitmap = await createImageBitmap(picture);
        const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
        const ctx = canvas.getContext('2d');
        ctx.drawImage(bitmap, 0, 0);
        const px = ctx.getImageData(0, 0, bitmap.width, bitmap.height);
        for (let i = 0; i < px.data.length; i += 4) for (let c = 0; c < 3; c++) px.data[i + c] = 255 - px.data[i + c];
        ctx.putImageData(px, 0, 0);
        const other = await canvas.convertToBlob({ type: 'image/png' });
        const ask = async (image) => {
          let done = null;
          for await (const ev of model.generate({ prompt: question, image, maxNewTokens: max })) if (ev.type === 'done') done = ev;
          return done;
        };
        const chat = async (url) => (await model.chat.completions.create({
          messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }, { type: 'text', text: question }] }],
          max_tokens: max, temperature: 0,
        })).webpte;
        await model.reset();
        const scratchA = await ask(picture);
        await model.reset();
        const scratchB = await ask(other);
        await model.reset();
        const [urlA, urlB] = [await asDataURL(picture), await asDataURL(other)];
        const chatA = await chat(urlA);
        const chatB = await chat(urlB); // the same messages but the picture: an edited request
        const chatBAgain = await chat(urlB);
        const bytes = new Uint8Array(await other.arrayBuffer());
        return { scratchA, scratchB, chatA, chatB, chatBAgain, otherPng: Array.from(bytes) };
      } finally {
        await model.dispose();
      }
    }, { question, max: 6 });
    const ids = tiny.prompt_ids[0];
    const counts = new Map();
    for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1);
    const [imageId] = [...counts].find(([, n]) => n === 64); // the <image> token, 64 rows
    const beforeImage = ids.indexOf(imageId);
    assert.equal(beforeImage, 8, 'the prompt holds 8 rows before its 64 image rows');
    assert.deepEqual(out.scratchA.tokenIds, tiny.answer_ids[0].slice(0, 6), 'picture: the native interpreter\'s ids');
    assert.notDeepEqual(out.scratchB.tokenIds, out.scratchA.tokenIds, 'the two pictures give different answers');
    assert.deepEqual(out.chatA.tokenIds, out.scratchA.tokenIds);
    assert.equal(out.chatB.reusedRows, beforeImage, 'the other picture\'s rows were computed again');
    assert.ok(out.scratchB.visionSeconds > 0, 'the other picture ran the vision program');
    assert.equal(out.chatB.visionSeconds, 0, 'its vision rows, known by content, were not computed again');
    assert.deepEqual(out.chatB.tokenIds, out.scratchB.tokenIds, 'the other picture gets its from-scratch answer');
    assert.equal(out.chatBAgain.reusedRows, ids.length - 1, 'the same picture again reuses every row but the newest');
    assert.deepEqual(out.chatBAgain.tokenIds, out.scratchB.tokenIds);
    otherAnswer = { png: Buffer.from(out.otherPng), ids: out.scratchB.tokenIds, a: out.scratchA.tokenIds, beforeImage };
  });

  test('a same-origin image URL is fetched for every request: new content there is a new picture', LONG, async () => {
    assert.ok(otherAnswer, 'needs the test above');
    const request = (max) => s.page.evaluate(async ({ question, max }) => {
      window.vlm ??= await suite.webpte.loadModel('/tiny-vlm/');
      const c = await window.vlm.chat.completions.create({
        messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: '/changing/pic.png' } }, { type: 'text', text: question }] }],
        max_tokens: max, temperature: 0,
      });
      return c.webpte;
    }, { question: JSON.parse(readFileSync(join(ROOT, 'tests/fixtures/tiny_vlm/expected.json'), 'utf8')).questions[0], max });
    try {
      const first = await request(6);
      writeFileSync(join(CHANGING, 'pic.png'), otherAnswer.png);
      const second = await request(6);
      assert.deepEqual(first.tokenIds, otherAnswer.a, 'the picture as first served');
      assert.equal(second.reusedRows, otherAnswer.beforeImage, 'the new content was not taken for the old picture');
      assert.deepEqual(second.tokenIds, otherAnswer.ids, 'the new content gets its from-scratch answer');
    } finally {
      await s.page.evaluate(async () => { await window.vlm?.dispose(); window.vlm = null; });
    }
  });
});

describe('network', () => {
  test('no request left 127.0.0.1', () => {
    assert.deepEqual(s.blocked, []);
  });
});
