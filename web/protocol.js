// Page <-> worker messages: a tagged union `{kind, id, content}`.
// A request is answered by `{kind: "return", id, content}` or
// `{kind: "throw", id, content: {name, message, ...}}`; before that the worker may send any
// number of stream events `{kind: "event", id, content}` (progress) for the same id.

import { DisposedError, WorkerError, errorFromWire, errorToWire } from './errors.js';

/** Kinds of request the worker serves. */
export const REQUESTS = Object.freeze(['load', 'run', 'reset', 'dispose', 'info']);

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
   * @param {{transfer?: Transferable[], onEvent?: (content: any) => void}} [options]
   * @returns {Promise<any>}
   */
  request(kind, content, { transfer = [], onEvent } = {}) {
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, onEvent });
      this.port.postMessage(checkMessage({ kind, id, content }, REQUESTS), transfer);
    });
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
 * Requests are served one at a time in arrival order (a run never overlaps a load).
 * A handler may return a `Transfer` to move buffers instead of copying them; `emit(content)`
 * sends a stream event for the request being served.
 * @param {{postMessage: Function, addEventListener: Function}} port
 * @param {Record<string, (content: any, emit: (c: any) => void) => any>} handlers
 */
export function serve(port, handlers) {
  let queue = Promise.resolve();
  port.addEventListener('message', (e) => {
    const msg = e.data;
    queue = queue.then(() => answer(port, handlers, msg));
  });
  port.start?.();
}

async function answer(port, handlers, msg) {
  const id = Number.isInteger(msg?.id) && msg.id >= 0 ? msg.id : -1;
  try {
    checkMessage(msg, REQUESTS);
    const handler = handlers[msg.kind];
    if (!handler) throw new TypeError(`this worker does not serve ${msg.kind}`);
    const emit = (content) => port.postMessage({ kind: 'event', id, content });
    const out = await handler(msg.content, emit);
    if (out instanceof Transfer) port.postMessage({ kind: 'return', id, content: out.value }, out.list);
    else port.postMessage({ kind: 'return', id, content: out ?? null });
  } catch (err) {
    if (id < 0) return; // nothing to answer: the sender cannot be told apart
    port.postMessage({ kind: 'throw', id, content: errorToWire(err) });
  }
}
