// Tokenizer parity: tokenizers.js (with webpte's pre-tokenizer rewrite, web/tokenizer.js) must
// give the ids and decoded text of the Rust `tokenizers` on 250 varied strings (unicode,
// unicode digits, odd whitespace, code, emoji, the chat special tokens). Goldens are written at
// test time by tests/js/make_tokenizer_goldens.py from the built SmolLM2 folder's tokenizer.json
// (`ensure_smollm2()`, built when missing). Env: WEBPTE_PY (default .venv/bin/python).
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Tokenizer } from '@huggingface/tokenizers';
import { BYTE_LEVEL_SPLIT, TextStream, TextTokenizer, compatTokenizerJSON } from '../../web/tokenizer.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const PY = process.env.WEBPTE_PY ?? join(ROOT, '.venv/bin/python');
const OUT = join(ROOT, 'build/web-test/tokenizer_goldens.json');

let golden;
let json;
let config;

before(() => {
  execFileSync(PY, [join(ROOT, 'tests/js/make_tokenizer_goldens.py'), OUT], { stdio: ['ignore', 'inherit', 'inherit'] });
  golden = JSON.parse(readFileSync(OUT, 'utf8'));
  json = JSON.parse(readFileSync(golden.tokenizer_json, 'utf8'));
  config = JSON.parse(readFileSync(golden.tokenizer_config, 'utf8'));
});

function mismatches(tok, field) {
  const bad = [];
  for (const c of golden.cases) {
    const got = field === 'ids' ? tok.encode(c.text) : tok.decode(c.ids);
    const want = c[field];
    if (JSON.stringify(got) !== JSON.stringify(want)) bad.push({ text: c.text, want, got });
  }
  return bad;
}

test('at least 200 varied strings, special tokens among them', () => {
  assert.ok(golden.cases.length >= 200, `${golden.cases.length} cases`);
  assert.ok(golden.cases.some((c) => c.ids.includes(1) && c.ids.includes(2)), 'chat special tokens are covered');
  assert.ok(golden.cases.some((c) => c.text.includes('\u0085')) && golden.cases.some((c) => c.text.includes('\ufeff')));
});

test('encode gives the Rust ids for every string', () => {
  const bad = mismatches(new TextTokenizer(Tokenizer, json, config), 'ids');
  assert.deepEqual(bad.slice(0, 3), [], `${bad.length} of ${golden.cases.length} strings differ`);
});

test('decode gives the Rust text for every id list', () => {
  const bad = mismatches(new TextTokenizer(Tokenizer, json, config), 'decoded');
  assert.deepEqual(bad.slice(0, 3), [], `${bad.length} of ${golden.cases.length} strings differ`);
});

test('without the rewrite tokenizers.js differs (U+0085, U+FEFF): the rewrite is needed', () => {
  const plain = new Tokenizer(json, config);
  const bad = golden.cases.filter((c) => JSON.stringify(plain.encode(c.text, { add_special_tokens: false }).ids) !== JSON.stringify(c.ids));
  assert.ok(bad.length > 0 && bad.every((c) => /[\u0085\ufeff]/.test(c.text)), JSON.stringify(bad.map((c) => c.text)));
});

test('the rewrite: ByteLevel(use_regex) -> Split(Rust pattern) + ByteLevel(no regex), input untouched', () => {
  const before = JSON.stringify(json.pre_tokenizer);
  const out = compatTokenizerJSON(json).pre_tokenizer;
  assert.equal(JSON.stringify(json.pre_tokenizer), before);
  assert.deepEqual(out.pretokenizers.map((p) => p.type), ['Split', 'Split', 'ByteLevel']);
  assert.equal(out.pretokenizers[1].pattern.Regex, BYTE_LEVEL_SPLIT);
  assert.equal(out.pretokenizers[2].use_regex, false);
  const top = compatTokenizerJSON({ pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false } }).pre_tokenizer;
  assert.deepEqual(top.pretokenizers.map((p) => p.type), ['Split', 'ByteLevel']);
  const prefixed = { type: 'ByteLevel', add_prefix_space: true };
  assert.equal(compatTokenizerJSON({ pre_tokenizer: prefixed }).pre_tokenizer, prefixed, 'left alone: a prefix space would land on every piece');
});

test('TextStream holds back a partial UTF-8 character until it completes', () => {
  const tok = new TextTokenizer(Tokenizer, json, config);
  const ids = tok.encode('é😀 ok');
  const stream = new TextStream(tok);
  const pieces = ids.map((id) => stream.push(id));
  assert.ok(pieces.some((p) => p === ''), `some token ends mid-character: ${JSON.stringify(pieces)}`);
  assert.ok(pieces.every((p) => !p.includes('\ufffd')));
  assert.equal(pieces.join(''), 'é😀 ok');
  assert.equal(stream.text, 'é😀 ok');
  assert.equal(tok.tokenId('<|im_start|>'), 1);
  assert.equal(tok.tokenId('<no such token>'), -1);
});
