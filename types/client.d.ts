/** The shared worker's Client (starts the worker). @throws {WorkerError} without Web Workers */
export function runtime(): any;
/**
 * What the shared worker runs on: `{programs, models, python, adapter: {vendor, architecture,
 * device, description} | null, created: {buffers, bindGroups}, memory: {wasmHeapBytes}}`
 * (the adapter is known once a program has been loaded). `gc` collects the
 * worker's garbage first where the browser exposes it (tests of long sessions).
 * @param {{gc?: boolean}} [options]
 * @returns {Promise<object>}
 */
export function runtimeInfo({ gc }?: {
    gc?: boolean;
}): Promise<object>;
/**
 * Terminate the shared worker (every loaded program and model is disposed with it). The next
 * `loadProgram` / `loadModel` starts a new one.
 */
export function terminate(): void;
/** `source` as an absolute URL (relative to the page). @param {string} source @throws {InputError} */
export function resolveURL(source: string): string;
