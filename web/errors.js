// Typed errors of webpte in the page. Names match the Python classes (py/webpte/errors.py)
// so an error raised by the planner in the worker arrives in the page as the same class.
// Every message says what went wrong and what to do. Each class's `name` is the string key of
// CLASSES below (set on its prototype), not the constructor's own name, which minifiers rename.

/** Base class of every error webpte raises on purpose. */
export class WebpteError extends Error {
  /** @param {string} message @param {object} [options] */
  constructor(message, options) {
    super(message, options);
  }
}

/** The bytes are not a well-formed ExecuTorch program (or VK00 graph). */
export class PteFormatError extends WebpteError {}

/** The graph uses ops that webpte has no kernel for; `ops` lists them. */
export class UnsupportedOpError extends WebpteError {
  /** @param {string} message @param {string[]} [ops] */
  constructor(message, ops = []) {
    super(message);
    this.ops = [...ops];
  }
}

/** A graph could not be lowered to a plan, or a plan is malformed or fails on the device. */
export class PlanError extends WebpteError {}

/** Inputs given to a program do not match what the method takes. */
export class InputError extends WebpteError {}

/** A new turn does not fit in the decoder's context; start a new conversation (`reset()`). */
export class ContextFullError extends InputError {}

/** A model's chat template failed to render (the template is data from the model folder). */
export class TemplateError extends WebpteError {}

/** A model folder is missing files or names them wrongly; `problems` lists every one. */
export class ModelFolderError extends WebpteError {
  /** @param {string} message @param {string[]} [problems] */
  constructor(message, problems = []) {
    super(message);
    this.problems = [...problems];
  }
}

/** A file's bytes do not match its pinned sha256; the file was not used (nor cached). */
export class HashMismatchError extends WebpteError {
  /** @param {string} message @param {{file?: string, expected?: string, actual?: string}} [detail] */
  constructor(message, detail = {}) {
    super(message);
    this.file = detail.file;
    this.expected = detail.expected;
    this.actual = detail.actual;
  }
}

/**
 * A constant the program keeps outside the `.pte` (ExecuTorch external data, `.ptd`) cannot be
 * had: no data file given holds its key, the file holding it is another export's, or a data
 * file is not a `.ptd`. `key` names the constant, `file` the data file (when one is known).
 */
export class ExternalDataError extends WebpteError {
  /** @param {string} message @param {{key?: string | null, file?: string | null}} [detail] */
  constructor(message, detail = {}) {
    super(message);
    this.key = detail.key ?? null;
    this.file = detail.file ?? null;
  }
}

/**
 * The browser refused to store model files for its storage quota: the name of a `cache`
 * progress event's `error` (loadModel then loads without caching them).
 */
export class QuotaError extends WebpteError {}

/** No usable WebGPU adapter or device. */
export class AdapterError extends WebpteError {}

/** `navigator.gpu` is missing or gives no adapter. */
export class NoWebGPUError extends AdapterError {}

/** The adapter's limits are smaller than the plan needs; `limit`, `needed`, `allowed` say which. */
export class AdapterLimitsError extends AdapterError {
  /** @param {string} message @param {{limit?: string, needed?: number, allowed?: number}} [detail] */
  constructor(message, detail = {}) {
    super(message);
    this.limit = detail.limit;
    this.needed = detail.needed;
    this.allowed = detail.allowed;
  }
}

/** The GPU device was lost (driver reset, another tab, out of memory). */
export class DeviceLostError extends AdapterError {}

/** The program was disposed (or its worker terminated); load it again. */
export class DisposedError extends WebpteError {}

/** The worker failed outside any request (it could not start, or crashed). */
export class WorkerError extends WebpteError {}

const CLASSES = {
  WebpteError, PteFormatError, UnsupportedOpError, PlanError, InputError, AdapterError,
  NoWebGPUError, AdapterLimitsError, DeviceLostError, DisposedError, WorkerError,
  ContextFullError, TemplateError, ModelFolderError, HashMismatchError, QuotaError,
  ExternalDataError,
};
for (const [name, cls] of Object.entries(CLASSES)) {
  Object.defineProperty(cls.prototype, 'name', { value: name, writable: true, configurable: true });
}

/**
 * An error as plain data for postMessage: `{name, message, ...detail}`.
 * Errors that are not webpte's keep their name (TypeError, ...) and message.
 * @param {unknown} err
 * @returns {{name: string, message: string, ops?: string[], limit?: string, needed?: number,
 *   allowed?: number, problems?: string[], file?: string | null, expected?: string, actual?: string,
 *   key?: string | null}}
 */
export function errorToWire(err) {
  if (!(err instanceof Error)) return { name: 'Error', message: String(err) };
  const out = { name: err.name || 'Error', message: err.message };
  if (err instanceof UnsupportedOpError) out.ops = err.ops;
  if (err instanceof ModelFolderError) out.problems = err.problems;
  if (err instanceof HashMismatchError) Object.assign(out, { file: err.file, expected: err.expected, actual: err.actual });
  if (err instanceof ExternalDataError) Object.assign(out, { key: err.key, file: err.file });
  if (err instanceof AdapterLimitsError) {
    Object.assign(out, { limit: err.limit, needed: err.needed, allowed: err.allowed });
  }
  return out;
}

/**
 * The error an `errorToWire` payload stands for: the webpte class of that name, or a plain
 * Error (with the name kept) for anything else.
 * @param {{name?: string, message?: string, ops?: string[], problems?: string[],
 *   key?: string | null, file?: string | null}} wire
 * @returns {Error}
 */
export function errorFromWire(wire) {
  const name = wire?.name ?? 'Error';
  const message = wire?.message ?? '';
  const cls = Object.hasOwn(CLASSES, name) ? CLASSES[name] : null;
  if (cls === UnsupportedOpError) return new UnsupportedOpError(message, wire.ops ?? []);
  if (cls === AdapterLimitsError) return new AdapterLimitsError(message, wire);
  if (cls === ModelFolderError) return new ModelFolderError(message, wire.problems ?? []);
  if (cls === HashMismatchError) return new HashMismatchError(message, wire);
  if (cls === ExternalDataError) return new ExternalDataError(message, wire);
  if (cls) return new cls(message);
  const err = new Error(message);
  err.name = name;
  return err;
}
