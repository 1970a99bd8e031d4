// The OpenAI-style chat API's request checking and response shaping (web/chat.js), without a
// model: requests become {history, prompt, image, options, stop}; unsupported fields are typed
// errors; stop sequences are held back and cut; chunks and completions have OpenAI's shape.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Completions, StopText, chatRequest, finishReason } from '../../web/chat.js';
import { InputError } from '../../web/errors.js';

const user = (content) => ({ role: 'user', content });

test('a conversation becomes the history before the last user message', () => {
  const req = chatRequest({
    model: 'smollm2', messages: [{ role: 'system', content: 'Be brief.' }, user('Hi'), { role: 'assistant', content: 'Hello!' },
      user([{ type: 'text', text: 'Name a' }, { type: 'text', text: 'city.' }])],
    max_tokens: 12, temperature: 0.5, top_p: 0.9, seed: 7, stop: 'END', top_k: 40, repetition_penalty: 1.1,
  });
  assert.deepEqual(req.history, [{ role: 'system', text: 'Be brief.', image: null }, { role: 'user', text: 'Hi', image: null },
    { role: 'assistant', text: 'Hello!', image: null }]);
  assert.equal(req.prompt, 'Name a\ncity.');
  assert.equal(req.image, null);
  assert.deepEqual(req.options, { maxNewTokens: 12, temperature: 0.5, topP: 0.9, topK: 40, repetitionPenalty: 1.1, seed: 7 });
  assert.deepEqual(req.stop, ['END']);
  assert.equal(req.stream, false);
  assert.deepEqual(chatRequest({ messages: [user('x')] }).options, { seed: null });
  assert.equal(chatRequest({ messages: [user('x')], max_completion_tokens: 3 }).options.maxNewTokens, 3);
});

test('images: image_url parts of user messages, only for vision models', () => {
  const img = { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } };
  const req = chatRequest({ messages: [user([img, { type: 'text', text: 'What is it?' }])] }, { hasVision: true });
  assert.equal(req.image, 'data:image/png;base64,AAAA');
  assert.equal(req.prompt, 'What is it?');
  assert.throws(() => chatRequest({ messages: [user([img])] }), (e) => e instanceof InputError && /no vision program/.test(e.message));
  assert.throws(() => chatRequest({ messages: [user([img, img])] }, { hasVision: true }), /one image per message/);
  assert.throws(() => chatRequest({ messages: [{ role: 'assistant', content: [img] }, user('x')] }, { hasVision: true }), /only user messages/);
  assert.throws(() => chatRequest({ messages: [user([{ type: 'image_url', image_url: { url: 'x', detail: 'high' } }])] }, { hasVision: true }), /detail/);
});

test('unsupported fields and malformed requests are InputErrors that name the problem', () => {
  const bad = [
    [{ messages: [user('x')], tools: [] }, /tools is not supported/],
    [{ messages: [user('x')], logit_bias: {}, functions: [] }, /logit_bias, functions are not supported/],
    [{ messages: [user('x')], n: 2 }, /n must be 1/],
    [{ messages: [user('x')], frequency_penalty: 0.5 }, /frequency_penalty is not supported/],
    [{ messages: [user('x')], logprobs: true }, /logprobs/],
    [{ messages: [user('x')], response_format: { type: 'json_object' } }, /response_format/],
    [{ messages: [] }, /non-empty array/],
    [{ messages: [{ role: 'tool', content: 'x' }] }, /role "tool" is not supported/],
    [{ messages: [user('x'), { role: 'assistant', content: 'y' }] }, /last message must be the user's/],
    [{ messages: [{ role: 'user', content: 'x', name: 'bob' }] }, /name not supported/],
    [{ messages: [user(42)] }, /string or an array of parts/],
    [{ messages: [user([{ type: 'audio' }])] }, /part 0 must be/],
    [{ messages: [user('x')], temperature: -1 }, /temperature must be a number in \[0, 2\]/],
    [{ messages: [user('x')], max_tokens: 1.5 }, /max_tokens must be an integer/],
    [{ messages: [user('x')], stop: ['a', 'b', 'c', 'd', 'e'] }, /up to 4/],
    [{ messages: [user('x')], stop: [''] }, /stop must be/],
    [{ messages: [user('x')], stream: 'yes' }, /stream must be a boolean/],
    [{ messages: [user('x')], stream_options: { foo: 1 } }, /include_usage/],
    [null, /one request object/],
  ];
  for (const [body, pattern] of bad) {
    assert.throws(() => chatRequest(body), (e) => e instanceof InputError && pattern.test(e.message)
      && e.message.startsWith('chat.completions.create:'), JSON.stringify(body));
  }
  assert.doesNotThrow(() => chatRequest({ messages: [user('x')], frequency_penalty: 0, presence_penalty: 0, n: 1, user: 'u', logprobs: false }));
});

test('stop sequences: held back while they may start, cut where they match, split over pieces', () => {
  const s = new StopText(['\n\n', 'END']);
  const out = ['Hello', ' E', 'N', 'ough', ' said', '\n', '\nmore'].map((p) => s.push(p));
  assert.deepEqual(out, ['Hello', ' ', '', 'ENough', ' said', '', '']);
  assert.equal(s.stopped, true);
  assert.equal(s.text, 'Hello ENough said');
  assert.equal(s.flush(), '');
  const t = new StopText(['END']);
  assert.equal(t.push('the E'), 'the ');
  assert.equal(t.flush(), 'E');
  assert.equal(t.text, 'the E');
  const none = new StopText([]);
  assert.equal(none.push('abc'), 'abc');
});

test('finish reasons', () => {
  assert.deepEqual(['stop_token', 'stop_sequence', 'max_new_tokens', 'context_full', 'aborted'].map(finishReason),
    ['stop', 'stop', 'length', 'length', 'abort']);
});

const DONE = { type: 'done', tokenIds: [5, 6], text: 'Paris.', promptRows: 30, newTokens: 2, reusedRows: 0, computedRows: 30,
  prefillTokensPerSecond: 100, decodeTokensPerSecond: 10, stopReason: 'stop_token' };

function fakeModel() {
  const seen = [];
  const model = { name: 'fake', hasVision: false };
  const completions = new Completions(model, async function* (req) {
    seen.push(req);
    yield { type: 'text', text: 'Par' };
    yield { type: 'text', text: 'is.' };
    yield DONE;
  });
  return { completions, seen };
}

test('stream: false gives one chat.completion with usage', async () => {
  const { completions, seen } = fakeModel();
  const c = await completions.create({ messages: [user('Capital of France?')], max_tokens: 2 });
  assert.equal(c.object, 'chat.completion');
  assert.match(c.id, /^chatcmpl-/);
  assert.equal(c.model, 'fake');
  assert.deepEqual(c.choices, [{ index: 0, message: { role: 'assistant', content: 'Paris.' }, finish_reason: 'stop', logprobs: null }]);
  assert.deepEqual(c.usage, { prompt_tokens: 30, completion_tokens: 2, total_tokens: 32 });
  assert.deepEqual(c.webpte.tokenIds, [5, 6]);
  assert.equal(seen[0].prompt, 'Capital of France?');
  await assert.rejects(completions.create({ messages: [user('x')], tools: [] }), InputError);
});

test('stream: true gives chunks: role first, content deltas, finish_reason and usage last', async () => {
  const { completions } = fakeModel();
  const chunks = [];
  for await (const ch of await completions.create({ messages: [user('x')], stream: true })) chunks.push(ch);
  assert.ok(chunks.every((ch) => ch.object === 'chat.completion.chunk' && ch.id === chunks[0].id));
  assert.deepEqual(chunks.map((ch) => ch.choices[0].delta), [{ role: 'assistant', content: '' }, { content: 'Par' }, { content: 'is.' }, {}]);
  assert.deepEqual(chunks.map((ch) => ch.choices[0].finish_reason), [null, null, null, 'stop']);
  assert.deepEqual(chunks.at(-1).usage, { prompt_tokens: 30, completion_tokens: 2, total_tokens: 32 });
  const noUsage = [];
  for await (const ch of await completions.create({ messages: [user('x')], stream: true, stream_options: { include_usage: false } })) noUsage.push(ch);
  assert.equal(noUsage.at(-1).usage, undefined);
});
