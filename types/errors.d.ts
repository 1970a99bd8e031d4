/**
 * An error as plain data for postMessage: `{name, message, ...detail}`.
 * Errors that are not webpte's keep their name (TypeError, ...) and message.
 * @param {unknown} err
 * @returns {{name: string, message: string, ops?: string[], limit?: string, needed?: number,
 *   allowed?: number, problems?: string[], file?: string | null, expected?: string, actual?: string,
 *   key?: string | null}}
 */
export function errorToWire(err: unknown): {
    name: string;
    message: string;
    ops?: string[];
    limit?: string;
    needed?: number;
    allowed?: number;
    problems?: string[];
    file?: string | null;
    expected?: string;
    actual?: string;
    key?: string | null;
};
/**
 * The error an `errorToWire` payload stands for: the webpte class of that name, or a plain
 * Error (with the name kept) for anything else.
 * @param {{name?: string, message?: string, ops?: string[], problems?: string[],
 *   key?: string | null, file?: string | null}} wire
 * @returns {Error}
 */
export function errorFromWire(wire: {
    name?: string;
    message?: string;
    ops?: string[];
    problems?: string[];
    key?: string | null;
    file?: string | null;
}): Error;
/** Base class of every error webpte raises on purpose. */
export class WebpteError extends Error {
    /** @param {string} message @param {object} [options] */
    constructor(message: string, options?: object);
}
/** The bytes are not a well-formed ExecuTorch program (or VK00 graph). */
export class PteFormatError extends WebpteError {
}
/** The graph uses ops that webpte has no kernel for; `ops` lists them. */
export class UnsupportedOpError extends WebpteError {
    /** @param {string} message @param {string[]} [ops] */
    constructor(message: string, ops?: string[]);
    ops: string[];
}
/** A graph could not be lowered to a plan, or a plan is malformed or fails on the device. */
export class PlanError extends WebpteError {
}
/** Inputs given to a program do not match what the method takes. */
export class InputError extends WebpteError {
}
/** A new turn does not fit in the decoder's context; start a new conversation (`reset()`). */
export class ContextFullError extends InputError {
}
/** A model's chat template failed to render (the template is data from the model folder). */
export class TemplateError extends WebpteError {
}
/** A model folder is missing files or names them wrongly; `problems` lists every one. */
export class ModelFolderError extends WebpteError {
    /** @param {string} message @param {string[]} [problems] */
    constructor(message: string, problems?: string[]);
    problems: string[];
}
/** A file's bytes do not match its pinned sha256; the file was not used (nor cached). */
export class HashMismatchError extends WebpteError {
    /** @param {string} message @param {{file?: string, expected?: string, actual?: string}} [detail] */
    constructor(message: string, detail?: {
        file?: string;
        expected?: string;
        actual?: string;
    });
    file: string;
    expected: string;
    actual: string;
}
/**
 * A constant the program keeps outside the `.pte` (ExecuTorch external data, `.ptd`) cannot be
 * had: no data file given holds its key, the file holding it is another export's, or a data
 * file is not a `.ptd`. `key` names the constant, `file` the data file (when one is known).
 */
export class ExternalDataError extends WebpteError {
    /** @param {string} message @param {{key?: string | null, file?: string | null}} [detail] */
    constructor(message: string, detail?: {
        key?: string | null;
        file?: string | null;
    });
    key: string;
    file: string;
}
/**
 * The browser refused to store model files for its storage quota: the name of a `cache`
 * progress event's `error` (loadModel then loads without caching them).
 */
export class QuotaError extends WebpteError {
}
/** No usable WebGPU adapter or device. */
export class AdapterError extends WebpteError {
}
/** `navigator.gpu` is missing or gives no adapter. */
export class NoWebGPUError extends AdapterError {
}
/** The adapter's limits are smaller than the plan needs; `limit`, `needed`, `allowed` say which. */
export class AdapterLimitsError extends AdapterError {
    /** @param {string} message @param {{limit?: string, needed?: number, allowed?: number}} [detail] */
    constructor(message: string, detail?: {
        limit?: string;
        needed?: number;
        allowed?: number;
    });
    limit: string;
    needed: number;
    allowed: number;
}
/** The GPU device was lost (driver reset, another tab, out of memory). */
export class DeviceLostError extends AdapterError {
}
/** The program was disposed (or its worker terminated); load it again. */
export class DisposedError extends WebpteError {
}
/** The worker failed outside any request (it could not start, or crashed). */
export class WorkerError extends WebpteError {
}
