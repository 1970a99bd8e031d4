// OpenAI-style chat completions on a loaded model, the shape web apps already write against:
//
//   const completion = await model.chat.completions.create({ messages, max_tokens: 64 });
//   completion.choices[0].message.content;
//   for await (const chunk of await model.chat.completions.create({ messages, stream: true })) {
//     out.textContent += chunk.choices[0]?.delta?.content ?? '';
//   }
//
// `messages` is the whole conversation; the worker's Python session renders it with the model's
// chat template and keeps the KV cache of the longest common token prefix with what it holds,
// so a request that extends the previous conversation only computes its new rows.

import { InputError } from './errors.js';

/** Fields of a request that webpte takes, and those refused unless at their neutral value. */
const TAKEN = new Set(['messages', 'model', 'stream', 'stream_options', 'max_tokens', 'max_completion_tokens',
  'temperature', 'top_p', 'seed', 'stop', 'n', 'top_k', 'repetition_penalty', 'user',
  'frequency_penalty', 'presence_penalty', 'logprobs', 'response_format']);
const ROLES = new Set(['system', 'user', 'assistant']);
const MAX_STOPS = 4;

const fail = (message) => { throw new InputError(`chat.completions.create: ${message}`); };

function number(body, key, { min = -Infinity, max = Infinity, integer = false } = {}) {
  const v = body[key];
  if (v == null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max || (integer && !Number.isInteger(v))) {
    fail(`${key} must be ${integer ? 'an integer' : 'a number'} in [${min}, ${max}], got ${JSON.stringify(v)}`);
  }
  return v;
}

function messageContent(m, i, hasVision) {
  const where = `messages[${i}] (${m.role})`;
  if (typeof m.content === 'string') return { text: m.content, image: null };
  if (!Array.isArray(m.content)) fail(`${where}: content must be a string or an array of parts`);
  const texts = [];
  let image = null;
  m.content.forEach((part, j) => {
    if (part?.type === 'text' && typeof part.text === 'string') {
      texts.push(part.text);
    } else if (part?.type === 'image_url') {
      const url = typeof part.image_url === 'string' ? part.image_url : part.image_url?.url;
      if (typeof url !== 'string' || !url) fail(`${where}: part ${j} needs image_url: {url: string}`);
      if (part.image_url?.detail != null && part.image_url.detail !== 'auto') {
        fail(`${where}: image detail ${JSON.stringify(part.image_url.detail)} is not supported (the model sees one global image)`);
      }
      if (!hasVision) fail(`${where}: this model has no vision program; send text only`);
      if (m.role !== 'user') fail(`${where}: only user messages may hold an image`);
      if (image) fail(`${where}: one image per message (the chat format puts it before the text)`);
      image = url;
    } else {
      fail(`${where}: part ${j} must be {type: 'text', text} or {type: 'image_url', image_url: {url}}, got ${JSON.stringify(part?.type)}`);
    }
  });
  return { text: texts.join('\n'), image };
}

/**
 * Check an OpenAI-style request and shape it for the worker. Fields webpte has no meaning for
 * (tools, logit_bias, n > 1, ...) are refused with an InputError naming them.
 * @param {any} body
 * @param {{hasVision?: boolean}} [model]
 * @returns {{history: {role: string, text: string, image: string | null}[], prompt: string,
 *   image: string | null, options: {maxNewTokens?: number, temperature?: number, topP?: number,
 *   topK?: number, repetitionPenalty?: number, seed?: number | null}, stop: string[],
 *   stream: boolean, includeUsage: boolean}}
 * @throws {InputError}
 */
export function chatRequest(body, { hasVision = false } = {}) {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) fail('takes one request object {messages, ...}');
  const unknown = Object.keys(body).filter((k) => body[k] !== undefined && !TAKEN.has(k));
  if (unknown.length) fail(`${unknown.join(', ')} ${unknown.length > 1 ? 'are' : 'is'} not supported by webpte`);
  for (const k of ['frequency_penalty', 'presence_penalty']) {
    if (body[k] != null && body[k] !== 0) fail(`${k} is not supported (use repetition_penalty, a multiplier as in transformers)`);
  }
  if (body.n != null && body.n !== 1) fail(`n must be 1, got ${JSON.stringify(body.n)}`);
  if (body.logprobs) fail('logprobs are not supported');
  if (body.response_format != null && body.response_format?.type !== 'text') fail('response_format other than {type: "text"} is not supported');
  if (body.model != null && typeof body.model !== 'string') fail('model must be a string (it is ignored: the request goes to this model)');
  if (body.stream != null && typeof body.stream !== 'boolean') fail('stream must be a boolean');
  if (body.stream_options != null && (body.stream_options === null || typeof body.stream_options !== 'object'
    || Object.keys(body.stream_options).some((k) => k !== 'include_usage'))) fail('stream_options takes only {include_usage}');

  const { messages } = body;
  if (!Array.isArray(messages) || !messages.length) fail('messages must be a non-empty array');
  const turns = messages.map((m, i) => {
    if (m === null || typeof m !== 'object') fail(`messages[${i}] is not an object`);
    if (!ROLES.has(m.role)) fail(`messages[${i}]: role ${JSON.stringify(m.role)} is not supported (system, user, assistant)`);
    const extra = Object.keys(m).filter((k) => k !== 'role' && k !== 'content' && m[k] !== undefined);
    if (extra.length) fail(`messages[${i}]: ${extra.join(', ')} not supported`);
    return { role: m.role, ...messageContent(m, i, hasVision) };
  });
  const last = turns.at(-1);
  if (last.role !== 'user') fail(`the last message must be the user's (it is ${last.role}); webpte writes the assistant's answer`);

  let stop = body.stop ?? [];
  if (typeof stop === 'string') stop = [stop];
  if (!Array.isArray(stop) || stop.length > MAX_STOPS || !stop.every((s) => typeof s === 'string' && s.length)) {
    fail(`stop must be a non-empty string or an array of up to ${MAX_STOPS} of them`);
  }
  const maxTokens = number(body, 'max_completion_tokens', { min: 0, integer: true }) ?? number(body, 'max_tokens', { min: 0, integer: true });
  const options = {
    maxNewTokens: maxTokens, temperature: number(body, 'temperature', { min: 0, max: 2 }),
    topP: number(body, 'top_p', { min: 0, max: 1 }), topK: number(body, 'top_k', { min: 0, integer: true }),
    repetitionPenalty: number(body, 'repetition_penalty', { min: 0 }), seed: number(body, 'seed', { integer: true }) ?? null,
  };
  for (const k of Object.keys(options)) if (options[k] === undefined) delete options[k];
  return {
    history: turns.slice(0, -1), prompt: last.text, image: last.image, options, stop: [...stop],
    stream: body.stream === true, includeUsage: body.stream_options?.include_usage ?? true,
  };
}

/**
 * Text held back while it may be the start of a stop sequence; `push` gives what is final.
 */
export class StopText {
  /** @param {string[]} stops */
  constructor(stops) {
    this.stops = stops;
    this.pending = '';
    /** Everything released so far (the answer when a stop sequence ended it). */
    this.text = '';
    this.stopped = false;
  }

  /** Add decoded text; returns the part that is final ('' while held back or after a stop). @param {string} piece */
  push(piece) {
    if (this.stopped) return '';
    const buf = this.pending + piece;
    let at = -1;
    for (const s of this.stops) {
      const i = buf.indexOf(s);
      if (i >= 0 && (at < 0 || i < at)) at = i;
    }
    if (at >= 0) {
      this.stopped = true;
      this.pending = '';
      return this.#release(buf.slice(0, at));
    }
    let keep = 0;
    for (const s of this.stops) {
      for (let n = Math.min(s.length - 1, buf.length); n > keep; n--) {
        if (buf.endsWith(s.slice(0, n))) { keep = n; break; }
      }
    }
    this.pending = buf.slice(buf.length - keep);
    return this.#release(buf.slice(0, buf.length - keep));
  }

  /** The end of the answer: release what was held back. */
  flush() {
    const rest = this.stopped ? '' : this.pending;
    this.pending = '';
    return this.#release(rest);
  }

  #release(s) {
    this.text += s;
    return s;
  }
}

/** OpenAI's finish_reason of a webpte stop reason. @param {string} stopReason */
export function finishReason(stopReason) {
  if (stopReason === 'stop_token' || stopReason === 'stop_sequence') return 'stop';
  if (stopReason === 'aborted') return 'abort';
  return 'length'; // max_new_tokens, context_full
}

/** `usage` of a done event. @param {{promptRows: number, newTokens: number}} done */
export function usage(done) {
  return { prompt_tokens: done.promptRows, completion_tokens: done.newTokens, total_tokens: done.promptRows + done.newTokens };
}

/** webpte's own numbers of a turn, beside OpenAI's fields. */
function stats(done) {
  const { reusedRows, computedRows, prefillTokensPerSecond, decodeTokensPerSecond, visionSeconds, stopReason, tokenIds } = done;
  return { reusedRows, computedRows, prefillTokensPerSecond, decodeTokensPerSecond, visionSeconds, stopReason, tokenIds };
}

let nextId = 0;

/** `model.chat.completions`: made by Model; `run(content, {signal})` streams the worker's events. */
export class Completions {
  /**
   * @param {{name: string, hasVision: boolean}} model
   * @param {(request: object, options: {signal?: AbortSignal}) => AsyncGenerator<any>} run
   */
  constructor(model, run) {
    /** @private */
    this.model = model;
    /** @private */
    this.run = run;
  }

  /**
   * Answer the conversation `body.messages` (OpenAI's chat completion request). With
   * `stream: true` resolves to an async iterable of `chat.completion.chunk` objects (the last
   * one has `finish_reason` and `usage`); otherwise to one `chat.completion`. Leaving the
   * stream's loop early stops the generation.
   * @param {ChatCompletionRequest} body
   * @param {{signal?: AbortSignal}} [options] `signal` stops the generation (finish_reason 'abort')
   * @returns {Promise<any>} a ChatCompletion, or an AsyncIterable of ChatCompletionChunk when streaming
   * @throws {InputError | ContextFullError | TemplateError | DisposedError}
   */
  async create(body, { signal } = {}) {
    const req = chatRequest(body, this.model);
    const head = { id: `chatcmpl-webpte-${nextId++}`, created: Math.floor(Date.now() / 1000), model: this.model.name };
    const events = this.run(req, { signal });
    if (req.stream) return chunks(events, head, req.includeUsage);
    let text = '';
    for await (const ev of events) {
      if (ev.type === 'text') text += ev.text;
      else {
        return {
          ...head, object: 'chat.completion',
          choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: finishReason(ev.stopReason), logprobs: null }],
          usage: usage(ev), webpte: stats(ev),
        };
      }
    }
    throw new InputError('chat.completions.create: the generation ended without a result');
  }
}

async function* chunks(events, head, includeUsage) {
  const chunk = (delta, finish = null) => ({ ...head, object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }] });
  yield chunk({ role: 'assistant', content: '' });
  for await (const ev of events) {
    if (ev.type === 'text') yield chunk({ content: ev.text });
    else yield { ...chunk({}, finishReason(ev.stopReason)), ...(includeUsage ? { usage: usage(ev) } : {}), webpte: stats(ev) };
  }
}

/**
 * @typedef {object} ChatMessage
 * @property {'system' | 'user' | 'assistant'} role
 * @property {string | ({type: 'text', text: string} | {type: 'image_url', image_url: {url: string, detail?: 'auto'}})[]} content
 */
/**
 * @typedef {object} ChatCompletionRequest
 * @property {ChatMessage[]} messages the whole conversation, ending with the user's message
 * @property {string} [model] ignored (the request goes to this model)
 * @property {boolean} [stream]
 * @property {{include_usage?: boolean}} [stream_options] usage is in the last chunk unless false
 * @property {number} [max_tokens] default 256
 * @property {number} [max_completion_tokens] same as max_tokens
 * @property {number} [temperature] 0 (default) is greedy
 * @property {number} [top_p]
 * @property {number} [top_k] webpte's: 0 (default) is no limit
 * @property {number} [repetition_penalty] webpte's: a multiplier as in transformers (1: none)
 * @property {number} [seed]
 * @property {string | string[]} [stop] up to 4 sequences that end the answer (not included)
 * @property {1} [n]
 * @property {string} [user] ignored
 */
