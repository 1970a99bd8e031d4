// The page's one webpte worker, started on first use and shared by every program and model.

import { Client } from './protocol.js';
import { InputError, WorkerError } from './errors.js';

let shared = null;

/** The shared worker's Client (starts the worker). @throws {WorkerError} without Web Workers */
export function runtime() {
  if (typeof Worker === 'undefined') {
    throw new WorkerError('webpte runs in a browser page or worker with Web Workers; this environment has none');
  }
  shared ??= new Client(new Worker(new URL('./worker.js', import.meta.url), { type: 'module', name: 'webpte' }));
  return shared;
}

/**
 * What the shared worker runs on: `{programs, models, python, adapter: {vendor, architecture,
 * device, description} | null, created: {buffers, bindGroups}, memory: {wasmHeapBytes}}`
 * (the adapter is known once a program has been loaded). `gc` collects the
 * worker's garbage first where the browser exposes it (tests of long sessions).
 * @param {{gc?: boolean}} [options]
 * @returns {Promise<object>}
 */
export function runtimeInfo({ gc = false } = {}) {
  return runtime().request('info', gc ? { gc: true } : null);
}

/**
 * Terminate the shared worker (every loaded program and model is disposed with it). The next
 * `loadProgram` / `loadModel` starts a new one.
 */
export function terminate() {
  shared?.close();
  shared = null;
}

/** `source` as an absolute URL (relative to the page). @param {string} source @throws {InputError} */
export function resolveURL(source) {
  try {
    return new URL(source, globalThis.location?.href).href;
  } catch {
    throw new InputError(`${JSON.stringify(source)} is not a URL (nor a path relative to this page)`);
  }
}
