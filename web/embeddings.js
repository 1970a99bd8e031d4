// Token embeddings computed in the worker from the int8 table: row r of
// `embed_tokens.i8.bin` ([vocab, hidden] int8) times `embed_tokens.scale.f32.bin[r]`
// (py/webpte/host/embeddings.py). The table stays a Blob (a cached entry's, a local file, or
// the download's: the browser keeps it, not the worker's heap, nor the wasm heap); a window
// reads only its rows, a few recent ones are kept. Image embeddings replace the rows of
// `<image>` tokens.

import { InputError, ModelFolderError } from './errors.js';

/** Bytes of recently used rows kept (at least one window's rows are, whatever the size). */
const ROW_CACHE_BYTES = 4 << 20;

export class EmbeddingTable {
  /**
   * @param {Blob} table int8 [vocab, hidden] @param {ArrayBuffer} scales f32 [vocab]
   * @param {number} hidden
   * @param {{cacheBytes?: number}} [options] bytes of recently used rows kept
   * @throws {ModelFolderError}
   */
  constructor(table, scales, hidden, { cacheBytes = ROW_CACHE_BYTES } = {}) {
    const problems = [];
    if (!(hidden > 0) || table.size % hidden) {
      problems.push(`the embedding table (${table.size} bytes) is not a whole number of ${hidden}-wide int8 rows`);
    }
    this.vocab = Math.floor(table.size / hidden);
    if (scales.byteLength !== this.vocab * 4) {
      problems.push(`the embedding scales hold ${scales.byteLength / 4} values for ${this.vocab} table rows`);
    }
    if (problems.length) {
      throw new ModelFolderError(`the model's embedding files do not fit its decoder: ${problems.join('; ')}; `
        + 'download the model files again', problems);
    }
    this.blob = table;
    this.scales = new Float32Array(scales);
    this.hidden = hidden;
    this.keptRows = Math.max(1, Math.floor(cacheBytes / hidden));
    /** @type {Map<number, Int8Array>} rows read, least recently used first */
    this.cache = new Map();
    /** the most bytes of rows held at once (kept and being read) */
    this.peakHeldBytes = 0;
  }

  #check(id) {
    if (!(Number.isInteger(id) && id >= 0 && id < this.vocab)) {
      throw new InputError(`token id ${id} is outside the embedding table (0..${this.vocab - 1})`);
    }
  }

  /**
   * The int8 rows of `ids` (one window's), read from the Blob where not kept:
   * a Map id -> Int8Array [hidden] for `write`.
   * @param {number[]} ids @returns {Promise<Map<number, Int8Array>>}
   * @throws {InputError} an id outside the table, or a table that can no longer be read
   */
  async rows(ids) {
    const want = [...new Set(ids)];
    for (const id of want) this.#check(id);
    const out = new Map();
    const missing = [];
    for (const id of want) {
      const row = this.cache.get(id);
      if (row) {
        this.cache.delete(id); // most recently used last
        this.cache.set(id, row);
        out.set(id, row);
      } else {
        missing.push(id);
      }
    }
    const h = this.hidden;
    this.peakHeldBytes = Math.max(this.peakHeldBytes, (this.cache.size + missing.length) * h);
    let read;
    try {
      read = await Promise.all(missing.map((id) => this.blob.slice(id * h, id * h + h).arrayBuffer()));
    } catch (err) {
      throw new InputError(`the embedding table could not be read (${err.message}); load the model again`);
    }
    missing.forEach((id, k) => {
      const row = new Int8Array(read[k]);
      if (row.length !== h) throw new InputError(`the embedding table gave ${row.length} of ${h} bytes of row ${id}; load the model again`);
      this.cache.set(id, row);
      out.set(id, row);
    });
    const keep = Math.max(this.keptRows, want.length);
    for (const id of this.cache.keys()) {
      if (this.cache.size <= keep) break;
      this.cache.delete(id);
    }
    return out;
  }

  /**
   * Write the embedding of token `id` into `out` at element `at`, from `rows` (see rows()).
   * @param {number} id @param {Float32Array} out @param {number} at @param {Map<number, Int8Array>} rows
   */
  write(id, out, at, rows) {
    this.#check(id);
    const row = rows.get(id);
    if (!row) throw new InputError(`row ${id} of the embedding table was not read first`);
    const scale = this.scales[id];
    for (let j = 0; j < this.hidden; j++) out[at + j] = row[j] * scale;
  }
}

/**
 * The rows a conversation feeds: token ids with image embeddings spliced over the `<image>`
 * tokens of the prompt in order (the k-th `<image>` token takes row k of the images, all
 * images of the conversation concatenated).
 */
export class PromptRows {
  /**
   * @param {EmbeddingTable} table @param {number[]} ids
   * @param {Float32Array[]} images each [rows, hidden] @param {number | null} imageId
   * @throws {InputError} when the `<image>` tokens and the image rows differ in number
   */
  constructor(table, ids, images, imageId) {
    this.table = table;
    this.ids = [...ids];
    this.images = images;
    const hidden = table.hidden;
    const imageRows = images.reduce((n, im) => n + im.length / hidden, 0);
    this.imageIndex = [];
    let k = 0;
    for (const id of this.ids) this.imageIndex.push(imageId != null && id === imageId ? k++ : -1);
    if (k !== imageRows) {
      throw new InputError(`${k} <image> tokens in the prompt but ${imageRows} image embedding rows; `
        + 'do not type "<image>" in the prompt (pass the picture as `image`)');
    }
  }

  /** A generated token joins the rows (it is fed as a plain token). @param {number} id */
  push(id) {
    this.ids.push(id);
    this.imageIndex.push(-1);
  }

  /**
   * float32 [rows, hidden] embeddings of positions start .. start+rows-1 (their table rows read first).
   * @param {number} start @param {number} rows @returns {Promise<Float32Array>}
   */
  async window(start, rows) {
    const h = this.table.hidden;
    const ids = [];
    for (let p = start; p < start + rows; p++) if (this.imageIndex[p] < 0) ids.push(this.ids[p]);
    const read = await this.table.rows(ids);
    const out = new Float32Array(rows * h);
    for (let r = 0; r < rows; r++) {
      const p = start + r;
      const k = this.imageIndex[p];
      if (k >= 0) out.set(this.#imageRow(k), r * h);
      else this.table.write(this.ids[p], out, r * h, read);
    }
    return out;
  }

  #imageRow(k) {
    const h = this.table.hidden;
    for (const im of this.images) {
      const n = im.length / h;
      if (k < n) return im.subarray(k * h, k * h + h);
      k -= n;
    }
    throw new InputError(`image row ${k} is missing`);
  }
}
