// Progress of a model load in bytes: several files, some from the network and some from the
// cache or a local folder. The ETA uses the network rate only (cached bytes arrive at once).

/**
 * Byte accounting of one stage ('fetch' or 'verify') over many files; emits
 * `{stage, file, loaded, total, fileLoaded, fileTotal, etaSeconds}` at most every
 * `intervalMs` (and always when a file completes).
 */
export class Progress {
  /**
   * @param {(event: object) => void} emit
   * @param {{stage?: string, intervalMs?: number, now?: () => number}} [options] `now` in ms
   */
  constructor(emit, { stage = 'fetch', intervalMs = 100, now = () => performance.now() } = {}) {
    this.emit = emit;
    this.stage = stage;
    this.intervalMs = intervalMs;
    this.now = now;
    /** @type {Map<string, {loaded: number, total: number}>} */
    this.files = new Map();
    this.loaded = 0;
    this.networkBytes = 0;
    this.networkStart = null;
    this.lastEmit = -Infinity;
  }

  /** Bytes of every file known so far (0 for a file whose size is not known yet). */
  get total() {
    let n = 0;
    for (const f of this.files.values()) n += Math.max(f.total, f.loaded);
    return n;
  }

  /** Announce a file and its size (0 if unknown). @param {string} file @param {number} total */
  expect(file, total) {
    const f = this.files.get(file);
    if (f) f.total = total;
    else this.files.set(file, { loaded: 0, total });
  }

  /**
   * Count `bytes` more of `file`; `network` says they came over the network (they set the
   * rate behind the ETA).
   * @param {string} file @param {number} bytes @param {{network?: boolean}} [options]
   */
  add(file, bytes, { network = true } = {}) {
    if (!this.files.has(file)) this.expect(file, 0);
    const f = this.files.get(file);
    f.loaded += bytes;
    this.loaded += bytes;
    if (network) {
      this.networkStart ??= this.now() - 1; // the first chunk took some time to come
      this.networkBytes += bytes;
    }
    const complete = f.total > 0 && f.loaded >= f.total;
    this.#maybeEmit(file, complete);
  }

  /** Mark `file` done (its size becomes what was counted) and emit. @param {string} file */
  finish(file) {
    const f = this.files.get(file);
    if (f) f.total = f.loaded;
    this.#maybeEmit(file, true);
  }

  /**
   * Seconds left at the network rate seen so far: null before any network byte, 0 when
   * every known byte is in.
   * @returns {number | null}
   */
  etaSeconds() {
    const left = this.total - this.loaded;
    if (left <= 0) return 0;
    if (!this.networkBytes) return null;
    const rate = this.networkBytes / ((this.now() - this.networkStart) / 1000); // bytes/s
    return rate > 0 ? left / rate : null;
  }

  /** The event this progress would emit now for `file`. @param {string} file */
  event(file) {
    const f = this.files.get(file) ?? { loaded: 0, total: 0 };
    return {
      stage: this.stage, file, loaded: this.loaded, total: this.total,
      fileLoaded: f.loaded, fileTotal: Math.max(f.total, f.loaded), etaSeconds: this.etaSeconds(),
    };
  }

  #maybeEmit(file, force) {
    const t = this.now();
    if (!force && t - this.lastEmit < this.intervalMs) return;
    this.lastEmit = t;
    this.emit(this.event(file));
  }
}
