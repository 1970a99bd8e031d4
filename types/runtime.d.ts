/**
 * Boot Pyodide once (emits `{stage: 'python'}` the first time) and import webpte.web_glue.
 * @param {(e: object) => void} emit
 * @returns {Promise<{pyodide: any, glue: any, boot_ms: number}>}
 */
export function bootPython(emit: (e: object) => void): Promise<{
    pyodide: any;
    glue: any;
    boot_ms: number;
}>;
/**
 * Pyodide's indexURL given where the wasm binary is: Pyodide fetches `${indexURL}pyodide.asm.wasm`
 * (the other core files are passed by URL). A bundler may have renamed the binary
 * (`assets/pyodide.asm-1a2b.wasm`): then the name Pyodide appends goes into the query string.
 * @param {string} wasm
 */
export function indexURL(wasm: string): string;
/**
 * The bundled lock file with every wheel's `file_name` replaced by the URL the bundler gave it.
 * @param {{packages: Record<string, {file_name: string}>}} lock
 */
export function bundledLock(lock: {
    packages: Record<string, {
        file_name: string;
    }>;
}): {
    packages: {};
};
/** A Python failure that is not a webpte error: a bug to report, with where it happened. */
export function pythonBug(err: any, what: any): WebpteError;
/**
 * Call a web_glue function answering `{"ok": value}` / `{"error": {...}}` JSON: the value, or
 * the typed error (same class name as in Python).
 * @param {() => string} call @param {string} what for messages
 */
export function callPy(call: () => string, what: string): any;
/**
 * The worker's GPUDevice, made once with limits covering `needed` (plan.limits); with
 * `caps` (web/limits.js resolveLimits), one device per caps, made within them.
 * @param {Record<string, number>} needed
 * @param {Record<string, number> | null} [caps]
 */
export function sharedDevice(needed: Record<string, number>, caps?: Record<string, number> | null): Promise<any>;
/**
 * What the planner is told about this browser: its WGSL language features (kernel variants,
 * e.g. dot4 int8, depend on them), `adapter_type:CPU|GPU`, `adapter_device:NAME` and
 * `subgroups` where it has them.
 * @returns {Promise<string[]>}
 */
export function planFeatures(): Promise<string[]>;
/**
 * Plan (in Python, unless `plan` is given) and upload one method of a program file.
 * Emits plan, upload, compile (kernels), but not ready.
 * @param {ArrayBuffer | object} bytes the .pte file, in memory or a streamed source
 *   (web/sources.js; then `data` files' `bytes` may be too, and `onBytes(file, n)` counts
 *   their bytes as they stream into the GPU buffers)
 * `inputShapes` (dims per input) plans a method exported with dynamic shapes for those dims.
 * `autotune` plans the decode variant measured fastest on this adapter (web/autotune.js) in
 * place of `plan` (stats.autotune says which, with its times or `cached`).
 * `caps` (web/limits.js resolveLimits) plans within them (weights past a binding are split)
 * and makes the device within them. `data`: the external data files (`.ptd`) the program keeps
 * constants in, `{name, bytes}` each (name: its URL, for messages).
 * @param {{method?: string, plan?: string | object | null, fusion?: string, poison?: boolean,
 *   data?: {name: string, bytes: ArrayBuffer}[],
 *   caps?: Record<string, number> | null,
 *   inputShapes?: number[][] | null, autotune?: boolean, emit: (e: object) => void}} options
 * @returns {Promise<{executor: Executor, positionInput: number[] | null, dynamic: boolean, stats: object}>}
 */
export function loadExecutor(bytes: ArrayBuffer | object, { method, plan, fusion, poison, inputShapes, autotune, caps, data, emit, onBytes }: {
    method?: string;
    plan?: string | object | null;
    fusion?: string;
    poison?: boolean;
    data?: {
        name: string;
        bytes: ArrayBuffer;
    }[];
    caps?: Record<string, number> | null;
    inputShapes?: number[][] | null;
    autotune?: boolean;
    emit: (e: object) => void;
}): Promise<{
    executor: Executor;
    positionInput: number[] | null;
    dynamic: boolean;
    stats: object;
}>;
export function pythonStarted(): boolean;
export function currentDevice(): Promise<GPUDevice> | null;
import { WebpteError } from './errors.js';
import { Executor } from './executor.js';
