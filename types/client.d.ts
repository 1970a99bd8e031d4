/** The shared worker's Client (starts the worker). @throws {WorkerError} without Web Workers */
export function runtime(): any;
/**
 * What the shared worker runs on: `{programs, models, python, adapter: {vendor, architecture,
 * device, description} | null}` (the adapter is known once a program has been loaded).
 * @returns {Promise<object>}
 */
export function runtimeInfo(): Promise<object>;
/**
 * Terminate the shared worker (every loaded program and model is disposed with it). The next
 * `loadProgram` / `loadModel` starts a new one.
 */
export function terminate(): void;
/** `source` as an absolute URL (relative to the page). @param {string} source @throws {InputError} */
export function resolveURL(source: string): string;
