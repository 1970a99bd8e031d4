// Models in the worker: a decoder (+ vision) program, the embedding table, the tokenizer and
// a Python ChatSession (web_glue: chat template, turn decisions, sampler). Serves loadModel,
// generate, resetModel and disposeModel. Python decides; this module moves tokens, embeddings
// and logits between the tokenizer, the executors and Python.

import { tokenizersURL } from './assets.js';
import { recordCachedModel } from './cache.js';
import { StopText } from './chat.js';
import { DisposedError, HashMismatchError, InputError, ModelFolderError } from './errors.js';
import { EmbeddingTable, PromptRows } from './embeddings.js';
import { CACHE_NAME, LocalFolder, UrlFolder, findMeta, readModelFiles } from './files.js';
import { pixelValues } from './image.js';
import { resolveLimits } from './limits.js';
import { BLOB_ROLES, STREAMED_ROLES, programFiles, verifiedBlob } from './model_sources.js';
import { preflightModel } from './preflight.js';
import { Progress } from './progress.js';
import { CheckedFile } from './sources.js';
import { HeldMeter } from './upload.js';
import { bootPython, callPy, loadExecutor } from './runtime.js';
import { TextStream, TextTokenizer } from './tokenizer.js';

let tokenizerLib = null;
function tokenizerClass() {
  tokenizerLib ??= import(/* webpackIgnore: true */ tokenizersURL()).then((m) => m.Tokenizer);
  tokenizerLib.catch(() => { tokenizerLib = null; });
  return tokenizerLib;
}

const text = (buf) => new TextDecoder().decode(buf);

// Prefill submits: about this long each (seconds), at most this many windows.
const PREFILL_SUBMIT_S = 0.25;
const MAX_PREFILL_CHUNK = 256;

function parseJSON(buf, name) {
  try {
    return JSON.parse(text(buf));
  } catch (err) {
    throw new ModelFolderError(`${name} is not valid JSON (${err.message}); download the model files again`, [`${name} is not valid JSON`]);
  }
}

/**
 * The Ranges (web/preflight.js) each program file of the model was planned from, by file
 * name: those files stream by Range requests while the preflight's plan is used.
 */
function plannedRanges(preflighted, manifest) {
  const out = new Map();
  for (const [role, answer] of Object.entries(preflighted ?? {})) {
    if (!answer?.planned || !answer.ranges) continue;
    out.set(manifest.files.find((f) => f.role === role).name, answer.ranges);
    const data = manifest.files.filter((f) => f.role === `${role}_data`);
    data.forEach((f, k) => out.set(f.name, answer.dataHeld[k].ranges));
  }
  return out;
}

/** A loaded model in the worker. */
class WorkerModel {
  /** seconds spent running the vision program, all turns together */
  #visionSeconds = 0;

  /**
   * Fetch/read, verify, plan and upload every file of the folder.
   * `preflight` (default true): plan the programs from their flatbuffer ranges and check the
   * device (`limits` caps it) before any file is read (web/preflight.js).
   * @param {{base?: string, files?: File[], verify?: boolean, cache?: boolean, fusion?: string,
   *   preflight?: boolean, limits?: Record<string, number> | null, autotune?: boolean}} source
   *   `autotune`: the decoder's decode variant measured (web/autotune.js)
   * @param {(e: object) => void} emit
   */
  static async load({ base, files, verify = true, cache = true, fusion = 'all', preflight = true, limits = null, autotune = false, chunkBytes = undefined }, emit) {
    const t0 = performance.now();
    const caps = resolveLimits(limits);
    const folder = files ? new LocalFolder(files) : new UrlFolder(base);
    const booting = bootPython(emit);
    const meta = await findMeta(folder);
    const booted = await booting;
    const { glue } = booted;
    // undefined, not null: Pyodide hands JS null to Python as JsNull, undefined as None
    const manifest = callPy(() => glue.model_manifest(meta?.name ?? '', meta?.bytes ? text(meta.bytes) : undefined, folder.where),
      'reading the model folder');
    const preflighted = preflight ? await preflightModel(folder, manifest, { glue, fusion, cache, limits: caps }) : null;
    const have = new Map(meta?.bytes ? [[meta.name, meta.bytes]] : []);
    // One byte count over every file of the model: the held ones are read first, the
    // programs' bytes are counted as they stream into the GPU buffers.
    const progress = new Progress(emit, { stage: 'fetch' });
    for (const f of manifest.files) progress.expect(f.name, f.size ?? 0);
    const streamedSpecs = manifest.files.filter((f) => STREAMED_ROLES.includes(f.role));
    const blobSpecs = manifest.files.filter((f) => BLOB_ROLES.includes(f.role));
    const problems = [];
    let programs = await programFiles(folder, streamedSpecs, { verify, cache, ranges: plannedRanges(preflighted, manifest), chunkBytes, progress, problems });
    const tableMeter = new HeldMeter(); // the bytes of the embedding table held at once
    const blobFiles = await programFiles(folder, blobSpecs, { verify, cache, chunkBytes, progress, problems, meter: tableMeter });
    let bytes;
    try {
      const held = manifest.files.filter((f) => !STREAMED_ROLES.includes(f.role) && !BLOB_ROLES.includes(f.role));
      bytes = await readModelFiles(folder, held, { verify, cache, emit, have, progress });
    } catch (err) {
      if (!(err instanceof ModelFolderError) || !problems.length) throw err;
      problems.push(...err.problems);
    }
    if (problems.length) {
      throw new ModelFolderError(`the model folder ${folder.where} is not usable:\n  - ${problems.join('\n  - ')}\n`
        + 'Check the folder (or base URL): every file of the model must be there.', problems);
    }
    // The embedding table is kept as a Blob, checked here by one pass in chunks.
    const blobs = new Map();
    for (const spec of blobSpecs) {
      blobs.set(spec.role, await verifiedBlob(folder, spec, blobFiles.get(spec.name), { verify, cache, chunkBytes, progress, problems, meter: tableMeter }));
    }
    for (const [name, f] of programs) progress.expect(name, f.size);
    const fetch_ms = performance.now() - t0;
    const file = (role) => {
      if (blobs.has(role)) return blobs.get(role);
      const spec = manifest.files.find((f) => f.role === role);
      return spec ? bytes.get(spec.name) : null;
    };
    const m = new WorkerModel(manifest);
    try {
      // A program the preflight planned from its file's ranges is not planned again.
      const load = (role) => {
        const spec = manifest.files.find((f) => f.role === role);
        // A program's external data files (.ptd), in the order the meta lists them.
        const data = manifest.files.filter((f) => f.role === `${role}_data`).map((f) => ({ name: f.name, bytes: programs.get(f.name) }));
        const all = [programs.get(spec.name), ...data.map((d) => d.bytes)];
        const ranged = all.every((f) => f.file instanceof CheckedFile);
        const reused = ranged && preflighted?.[role]?.planned;
        if (reused) emit({ stage: 'plan' });
        const { plan_ms, plan_total_ms, bytes_read } = preflighted?.[role] ?? {};
        const plan = reused && { ...reused, plan_ms, plan_total_ms, bytes_read, boot_ms: booted.boot_ms };
        const onBytes = (k, n) => {
          if (all[k].counted) return;
          progress.add(all[k].spec.name, n, { network: !all[k].fromCache });
          if (progress.files.get(all[k].spec.name).loaded >= all[k].size) progress.finish(all[k].spec.name);
        };
        return loadExecutor(all[0], { fusion, emit, plan: plan || null, autotune: autotune === true && role === 'decoder', caps, data, onBytes });
      };
      // A cached program file that fails its hash is dropped and fetched again, once.
      const loadFresh = async (role) => {
        try {
          return await load(role);
        } catch (err) {
          if (!(err instanceof HashMismatchError && err.fromCache)) throw err;
          const stale = streamedSpecs.filter((f) => programs.get(f.name).fromCache);
          for (const f of stale) await (await caches.open(CACHE_NAME)).delete(folder.url(f.name));
          const again = await programFiles(folder, stale, { verify, cache, chunkBytes, progress, problems });
          programs = new Map([...programs, ...again]);
          return load(role);
        }
      };
      m.decoder = await loadFresh('decoder');
      if (manifest.files.some((f) => f.role === 'vision')) m.vision = await loadFresh('vision');
      m.setup(glue, file, await tokenizerClass());
    } catch (err) {
      m.dispose();
      throw err;
    }
    if (base && cache) await recordCachedModel(base, manifest.name, manifest.files);
    m.stats = { fetch_ms, load_ms: performance.now() - t0, decoder: m.decoder.stats, vision: m.vision?.stats ?? null, preflight: preflighted,
      embeddings_bytes: m.table.blob.size, embeddings_held_bytes: tableMeter.peak };
    emit({ stage: 'ready' });
    return m;
  }

  constructor(manifest) {
    this.manifest = manifest;
    this.decoder = null;
    this.vision = null;
    this.session = null;
    /** @type {Map<string, Float32Array>} vision rows ([rows, hidden]) by image key (Python's content hash) */
    this.imageRows = new Map();
    /** @type {Map<string, string>} the key of each chat API image, by URL */
    this.urlKeys = new Map();
  }

  setup(glue, file, Tokenizer) {
    const plan = this.decoder.executor.plan;
    const [posIndex, rows] = this.decoder.positionInput ?? [];
    if (posIndex == null || plan.inputs.length !== 2 || plan.max_context == null) {
      throw new ModelFolderError('the decoder is not a windowed decoder (embeds, input_pos) with a KV cache; '
        + 'use a model exported with the webpte decoder recipe', ['the decoder takes no input_pos']);
    }
    this.posIndex = posIndex;
    this.embedsIndex = 1 - posIndex;
    this.rows = rows;
    this.hidden = plan.inputs[this.embedsIndex].shape.at(-1);
    this.maxContext = plan.max_context;
    this.vocab = plan.outputs[0].shape.at(-1);
    const problems = [];
    if (this.manifest.hidden_size != null && this.manifest.hidden_size !== this.hidden) {
      problems.push(`the meta file says hidden size ${this.manifest.hidden_size}, the decoder takes ${this.hidden}`);
    }
    const configBytes = file('tokenizer_config');
    this.tokenizer = new TextTokenizer(Tokenizer, parseJSON(file('tokenizer'), 'tokenizer.json'),
      configBytes ? parseJSON(configBytes, 'tokenizer_config.json') : {});
    this.table = new EmbeddingTable(file('embed_tokens'), file('embed_scales'), this.hidden);
    this.session = glue.ChatSession(JSON.stringify(this.manifest), configBytes ? text(configBytes) : '{}',
      (t) => this.tokenizer.tokenId(t), this.rows, this.maxContext);
    this.facts = callPy(() => this.session.setup(), 'checking the tokenizer');
    if (this.vision) {
      const [input] = this.vision.executor.plan.inputs;
      const [output] = this.vision.executor.plan.outputs;
      this.imageSize = input.shape.slice(-2); // [height, width] of NCHW pixel_values
      const [imageRows, width] = output.shape.slice(-2);
      if (width !== this.hidden) problems.push(`the vision program gives ${width}-wide rows, the decoder takes ${this.hidden}`);
      if (imageRows !== this.facts.image_rows) problems.push(`the vision program gives ${imageRows} rows, the prompt has ${this.facts.image_rows} <image> tokens per image`);
      if (this.facts.image_id == null) problems.push('the model has a vision program but its tokenizer has no <image> token');
    }
    if (problems.length) {
      throw new ModelFolderError(`the model's files do not fit together:\n  - ${problems.join('\n  - ')}`, problems);
    }
  }

  /** What the page learns about the model. */
  info(handle) {
    return {
      handle, name: this.manifest.name, layout: this.manifest.layout, vision: !!this.vision,
      imageSize: this.imageSize ?? null, maxContext: this.maxContext, hidden: this.hidden,
      vocab: this.vocab, stats: this.stats,
    };
  }

  /**
   * The prompt's windows in as few submits as keep an abort prompt: the first submit holds one
   * window, to time it; later ones as many as take about PREFILL_SUBMIT_S (a whole prompt on a
   * GPU, one window a submit on a software adapter, where one takes seconds). An abort is seen
   * between submits (a submitted command buffer cannot be stopped). -> {out: the last window's
   * logits or the words of `readout` (null when aborted before it), windows run, submits}.
   */
  async #prefill(rows, starts, readout, signal) {
    let out = null;
    let chunk = 1;
    let submits = 0;
    let i = 0;
    while (i < starts.length && !signal?.aborted) {
      const part = starts.slice(i, i + chunk);
      i += part.length;
      const t = performance.now();
      out = await this.#windows(rows, part, readout);
      submits += 1;
      const perWindow = (performance.now() - t) / 1000 / part.length;
      chunk = Math.max(1, Math.min(MAX_PREFILL_CHUNK, Math.floor(PREFILL_SUBMIT_S / Math.max(perWindow, 1e-6))));
    }
    return { out: i === starts.length ? out : null, windows: i, submits };
  }

  /** The windows at `starts` in one submit: the last one's logits, or the words of `readout`. */
  async #windows(prompt, starts, readout) {
    const calls = [];
    for (const start of starts) { // one window's rows read at a time: the rows kept stay bounded
      const inputs = [];
      inputs[this.embedsIndex] = { data: await prompt.window(start, this.rows), shape: [1, this.rows, this.hidden] };
      inputs[this.posIndex] = new BigInt64Array([BigInt(start)]);
      calls.push(inputs);
    }
    const out = await this.decoder.executor.runCalls(calls, { readout });
    return readout == null ? out[0] : out;
  }

  /**
   * One turn: the answer to `prompt` streamed as `{type: 'text', text}` events; returns the
   * done event's fields.
   */
  async generate(opts, emit, signal) {
    const { prompt, maxNewTokens = 256, temperature = 0, topK = 0, topP = 1,
      repetitionPenalty = 1, seed = null, history = null, stop = [] } = opts;
    if (typeof prompt !== 'string') throw new InputError('generate({prompt}) takes the question as a string');
    const session = this.session;
    const visionBefore = this.#visionSeconds;
    if (history) { // the chat API: the conversation comes with the request, images by URL
      const turns = [];
      for (const m of history) {
        turns.push({ role: m.role, text: m.text, image: m.image == null ? null : await this.#imageByURL(m.image, opts.images) });
      }
      callPy(() => session.set_history(JSON.stringify(turns)), 'the chat history');
    }
    let key = null; // the image of this turn, known by its content (Python compares keys for reuse)
    if (opts.image) key = await this.#imageKey(opts.image);
    else if (opts.imageKey != null) key = await this.#imageByURL(opts.imageKey, opts.images);
    const vision_s = this.#visionSeconds - visionBefore; // the vision program's runs only, not key lookups
    const ids = this.tokenizer.encode(callPy(() => session.render(prompt, key != null), 'rendering the prompt'));
    const options = JSON.stringify({ max_new_tokens: maxNewTokens, temperature, top_k: topK, top_p: topP,
      repetition_penalty: repetitionPenalty, seed, readouts: this.decoder.executor.plan.readouts.map((r) => r.k) });
    // undefined, not null: Pyodide hands JS null to Python as JsNull, undefined as None
    const { reuse, starts, images, readout } = callPy(() => session.begin(prompt, key ?? undefined, ids, options), 'starting the turn');
    const rows = new PromptRows(this.table, ids, images.map((k) => this.imageRows.get(k)), this.facts.image_id);
    const stream = new TextStream(this.tokenizer);
    const answer = new StopText(stop);
    let stopReason = 'aborted';
    let prefill_s = 0;
    let decode_s = 0;
    let prefilled = false;
    let logits = null;
    let prefillRun = 0; // windows computed (fewer than starts when aborted)
    let prefillSubmits = 0;
    let sample_s = 0; // in Python: logits -> token (the Sampler) and the stop decision
    try {
      const t1 = performance.now();
      // the logits, or the readout's words (ids and logits ranked on the device)
      ({ out: logits, windows: prefillRun, submits: prefillSubmits } = await this.#prefill(rows, starts, readout, signal));
      prefill_s = (performance.now() - t1) / 1000;
      prefilled = !signal?.aborted;
      if (prefilled) {
        callPy(() => session.prefilled(), 'the turn');
        const t2 = performance.now();
        try {
          while (!signal?.aborted) {
            const ts = performance.now();
            const step = callPy(() => session.step(logits), 'sampling');
            sample_s += (performance.now() - ts) / 1000;
            if (step.stop) { stopReason = step.stop; break; }
            const piece = answer.push(stream.push(step.token));
            if (piece) emit({ type: 'text', text: piece });
            if (answer.stopped) { stopReason = 'stop_sequence'; break; }
            rows.push(step.token);
            logits = await this.#windows(rows, [step.start], readout);
          }
        } finally {
          decode_s = (performance.now() - t2) / 1000;
        }
      }
      const rest = answer.flush();
      if (rest) emit({ type: 'text', text: rest });
    } finally {
      callPy(() => session.finish(answer.stopped ? answer.text : stream.text), 'ending the turn');
    }
    const computed = prefilled && starts.length ? ids.length - starts[0] : 0;
    const newTokens = stream.ids.length;
    return {
      type: 'done', tokenIds: [...stream.ids], text: answer.stopped ? answer.text : stream.text, promptRows: ids.length, reusedRows: reuse,
      computedRows: computed, prefillWindows: starts.length, prefillWindowsRun: prefillRun, prefillSubmits, newTokens,
      prefillTokensPerSecond: prefill_s ? computed / prefill_s : 0,
      decodeTokensPerSecond: decode_s ? newTokens / decode_s : 0,
      prefillSeconds: prefill_s, decodeSeconds: decode_s, visionSeconds: vision_s, samplingSeconds: sample_s, stopReason,
    };
  }

  /** Vision rows of `{data, height, width}` RGBA pixels. */
  async #vision(image) {
    if (!this.vision) throw new InputError(`model ${this.manifest.name} has no vision program; it takes text only`);
    const [h, w] = this.imageSize;
    const t = performance.now();
    try {
      const [rows] = await this.vision.executor.run([{ data: pixelValues(image.data, image.height, image.width), shape: [1, 3, h, w] }]);
      return rows;
    } finally {
      this.#visionSeconds += (performance.now() - t) / 1000;
    }
  }

  /** The key (content hash, from Python) of `{data, height, width}` pixels; their vision rows are computed once per key. */
  async #imageKey(pixels) {
    const key = callPy(() => this.session.image_key(pixels.data, pixels.height, pixels.width), 'the image');
    if (!this.imageRows.has(key)) this.imageRows.set(key, await this.#vision(pixels));
    return key;
  }

  /** The key of the chat API's image `url`: of the pixels sent with this request, else of those sent before. */
  async #imageByURL(url, sent = {}) {
    if (sent?.[url]) this.urlKeys.set(url, await this.#imageKey(sent[url]));
    else if (!this.urlKeys.has(url)) throw new InputError(`the image ${url.slice(0, 80)} was neither sent nor seen before; send the request again`);
    return this.urlKeys.get(url);
  }

  async reset() {
    callPy(() => this.session.reset(), 'reset');
    await this.decoder.executor.reset();
  }

  dispose() {
    this.decoder?.executor.dispose();
    this.vision?.executor.dispose();
    this.session?.destroy();
    this.decoder = this.vision = this.session = this.table = null;
    this.imageRows.clear();
    this.urlKeys.clear();
  }
}

/** The model request handlers of the worker, and how many models are loaded. */
export function modelHandlers() {
  /** @type {Map<number, WorkerModel>} */
  const models = new Map();
  let next = 1;
  const model = (handle) => {
    const m = models.get(handle);
    if (!m) throw new DisposedError(`model ${handle} was disposed; load it again`);
    return m;
  };
  return {
    count: () => models.size,
    handlers: {
      /** {base | files, verify, cache, fusion} -> model info */
      async loadModel(source, emit) {
        const m = await WorkerModel.load(source, emit);
        const handle = next++;
        models.set(handle, m);
        return m.info(handle);
      },
      /** {handle, prompt, image?, ...options} -> done fields; text events while it runs */
      generate({ handle, ...opts }, emit, signal) {
        return model(handle).generate(opts, emit, signal);
      },
      async resetModel({ handle }) {
        await model(handle).reset();
      },
      async disposeModel({ handle }) {
        models.get(handle)?.dispose();
        models.delete(handle);
      },
    },
  };
}
