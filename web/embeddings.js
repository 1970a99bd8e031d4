// Token embeddings computed in the worker from the fetched int8 table: row r of
// `embed_tokens.i8.bin` ([vocab, hidden] int8) times `embed_tokens.scale.f32.bin[r]`
// (py/webpte/host/embeddings.py). The table stays in its JS ArrayBuffer (never in the wasm
// heap); a window reads only its rows. Image embeddings replace the rows of `<image>` tokens.

import { InputError, ModelFolderError } from './errors.js';

export class EmbeddingTable {
  /**
   * @param {ArrayBuffer} table int8 [vocab, hidden] @param {ArrayBuffer} scales f32 [vocab]
   * @param {number} hidden
   * @throws {ModelFolderError}
   */
  constructor(table, scales, hidden) {
    const problems = [];
    if (!(hidden > 0) || table.byteLength % hidden) {
      problems.push(`the embedding table (${table.byteLength} bytes) is not a whole number of ${hidden}-wide int8 rows`);
    }
    this.vocab = Math.floor(table.byteLength / hidden);
    if (scales.byteLength !== this.vocab * 4) {
      problems.push(`the embedding scales hold ${scales.byteLength / 4} values for ${this.vocab} table rows`);
    }
    if (problems.length) {
      throw new ModelFolderError(`the model's embedding files do not fit its decoder: ${problems.join('; ')}; `
        + 'download the model files again', problems);
    }
    this.table = new Int8Array(table);
    this.scales = new Float32Array(scales);
    this.hidden = hidden;
  }

  /** Write the embedding of token `id` into `out` at element `at`. */
  write(id, out, at) {
    if (!(id >= 0 && id < this.vocab)) throw new InputError(`token id ${id} is outside the embedding table (0..${this.vocab - 1})`);
    const h = this.hidden;
    const scale = this.scales[id];
    const row = this.table.subarray(id * h, id * h + h);
    for (let j = 0; j < h; j++) out[at + j] = row[j] * scale;
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

  /** float32 [rows, hidden] embeddings of positions start .. start+rows-1. */
  window(start, rows) {
    const h = this.table.hidden;
    const out = new Float32Array(rows * h);
    for (let r = 0; r < rows; r++) {
      const p = start + r;
      const k = this.imageIndex[p];
      if (k >= 0) out.set(this.#imageRow(k), r * h);
      else this.table.write(this.ids[p], out, r * h);
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
