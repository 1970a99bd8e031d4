// Page <-> worker messages: a tagged union `{kind, id, content}`.
// A request is answered by `{kind: "return", id, content}` or
// `{kind: "throw", id, content: {name, message, ...}}`; before that the worker may send any
// number of stream events `{kind: "event", id, content}` (progress, generated text) for the
// same id. `{kind: "cancel", id, content: {id: N}}` asks the worker to stop request N early: it
// is served at once (not queued) and aborts the AbortSignal the handler of N was given.
// `loseDevice` (tests of device-loss recovery) is served at once too.

import { DisposedError, WorkerError, errorFromWire, errorToWire } from './errors.js';

/** Kinds of request the worker serves. */
export const REQUESTS = Object.freeze(['load', 'run', 'reset', 'dispose', 'info',
  'loadModel', 'generate', 'resetModel', 'disposeModel', 'cancel', 'loseDevice']);

/** Kinds of message the worker sends back. */
export const REPLIES = Object.freeze(['return', 'throw', 'event']);

/**
 * A value to return together with the objects to transfer (not copy) to the other side.
 */
export class Transfer {
  /** @param {unknown} value @param {Transferable[]} list */
  constructor(value, list) {
    this.value = value;
    this.list = list;
  }
}

/**
 * Check that `msg` is a well-formed message; returns it or throws a TypeError.
 * @param {any} msg
 * @param {readonly string[]} kinds allowed kinds
 */
export function checkMessage(msg, kinds) {
  if (msg === null || typeof msg !== 'object') throw new TypeError('message is not an object');
  if (!kinds.includes(msg.kind)) throw new TypeError(`unknown message kind ${JSON.stringify(msg.kind)}`);
  if (!Number.isInteger(msg.id) || msg.id < 0) throw new TypeError(`message id ${msg.id} is not a non-negative integer`);
  return msg;
}

/**
 * The page side: sends requests over a port (a Worker or MessagePort) and resolves each
 * with its `return`, rejects with the typed error of its `throw`.
 */
export class Client {
  /** @param {{postMessage: Function, addEventListener: Function, terminate?: Function}} port */
  constructor(port) {
    this.port = port;
    this.nextId = 0;
    /** @type {Map<number, {resolve: Function, reject: Function, onEvent?: Function}>} */
    this.pending = new Map();
    this.failure = null;
    port.addEventListener('message', (e) => this.#receive(e.data));
    port.addEventListener('error', (e) => this.fail(new WorkerError(
      `the webpte worker failed: ${e.message ?? e}; check that every file of dist/ is served`)));
    port.addEventListener('messageerror', () => this.fail(new WorkerError(
      'a reply from the webpte worker could not be deserialized')));
    port.start?.();
  }

  /**
   * Send one request.
   * @param {string} kind one of REQUESTS
   * @param {unknown} content
   * @param {{transfer?: Transferable[], onEvent?: (content: any) => void, signal?: AbortSignal}} [options]
   *   `signal`: when it aborts, the worker is asked to cancel this request (the handler decides
   *   what that means; e.g. generation stops and returns what it has)
   * @returns {Promise<any>}
   */
  request(kind, content, { transfer = [], onEvent, signal } = {}) {
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId++;
    const done = new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, onEvent });
      this.port.postMessage(checkMessage({ kind, id, content }, REQUESTS), transfer);
    });
    if (signal) {
      const cancel = () => { if (this.pending.has(id)) this.request('cancel', { id }).catch(() => {}); };
      if (signal.aborted) cancel();
      else {
        signal.addEventListener('abort', cancel, { once: true });
        done.finally(() => signal.removeEventListener('abort', cancel)).catch(() => {});
      }
    }
    return done;
  }

  /** Reject every pending and future request with `err` (worker gone). */
  fail(err) {
    this.failure ??= err;
    for (const p of this.pending.values()) p.reject(this.failure);
    this.pending.clear();
  }

  /** Terminate the worker; pending requests reject with DisposedError. */
  close() {
    this.fail(new DisposedError('the webpte worker was terminated; load the program again'));
    this.port.terminate?.();
    this.port.close?.();
  }

  #receive(msg) {
    try {
      checkMessage(msg, REPLIES);
    } catch (err) {
      this.fail(new WorkerError(`malformed reply from the webpte worker: ${err.message}`));
      return;
    }
    const p = this.pending.get(msg.id);
    if (!p) return;
    if (msg.kind === 'event') {
      p.onEvent?.(msg.content);
      return;
    }
    this.pending.delete(msg.id);
    if (msg.kind === 'return') p.resolve(msg.content);
    else p.reject(errorFromWire(msg.content));
  }
}

/**
 * The worker side: answer requests on `port` with `handlers[kind](content, emit)`.
 * Requests are served one at a time in arrival order (a run never overlaps a load), except
 * `cancel`, answered at once. A handler may return a `Transfer` to move buffers instead of
 * copying them; `emit(content)` sends a stream event for the request being served; `signal`
 * aborts when the page cancels the request.
 * @param {{postMessage: Function, addEventListener: Function}} port
 * @param {Record<string, (content: any, emit: (c: any) => void, signal: AbortSignal) => any>} handlers
 */
export function serve(port, handlers) {
  let queue = Promise.resolve();
  /** @type {Map<number, AbortController>} requests received and not yet answered */
  const live = new Map();
  port.addEventListener('message', (e) => {
    const msg = e.data;
    if (msg?.kind === 'cancel') {
      live.get(msg.content?.id)?.abort();
      answer(port, { cancel: () => null }, msg, null);
      return;
    }
    if (msg?.kind === 'loseDevice') return void answer(port, handlers, msg, null);
    const controller = new AbortController();
    if (Number.isInteger(msg?.id)) live.set(msg.id, controller);
    queue = queue.then(() => answer(port, handlers, msg, controller.signal))
      .finally(() => live.delete(msg?.id));
  });
  port.start?.();
}

async function answer(port, handlers, msg, signal) {
  const id = Number.isInteger(msg?.id) && msg.id >= 0 ? msg.id : -1;
  try {
    checkMessage(msg, REQUESTS);
    const handler = handlers[msg.kind];
    if (!handler) throw new TypeError(`this worker does not serve ${msg.kind}`);
    const emit = (content) => port.postMessage({ kind: 'event', id, content });
    const out = await handler(msg.content, emit, signal);
    if (out instanceof Transfer) port.postMessage({ kind: 'return', id, content: out.value }, out.list);
    else port.postMessage({ kind: 'return', id, content: out ?? null });
  } catch (err) {
    if (id < 0) return; // nothing to answer: the sender cannot be told apart
    port.postMessage({ kind: 'throw', id, content: errorToWire(err) });
  }
}
