// Execute a Plan on navigator.gpu. Mirrors py/webpte/native/executor.py: everything is made
// at load (buffers, pipelines with layout "auto", bind groups, MAP_READ staging buffers); a
// call writes the inputs, records every dispatch in one compute pass, submits once and reads
// back only the outputs, or only a readout's words (plan.readouts: a decoder's best token ids
// and their logits, ranked on the device). Several calls (a prompt's windows) may share one
// submit: their inputs are uploaded side by side first and each call copies its own into the
// input buffers inside the command stream. The executor knows nothing about ops.

import { AdapterError, DeviceLostError, DisposedError, InputError, PlanError } from './errors.js';
import {
  describeIO, fromStorage, parsePlan, storageBytes, toStorage,
} from './plan.js';
import { validatePlan } from './plan_validate.js';
import { BytesFile } from './sources.js';
import { HeldMeter, StreamedUpload, initialise } from './upload.js';
import { checkFeatures, checkLimits, gpuCreations, gpuTraffic, recordCall, requestDevice } from './device.js';


/**
 * A Plan made real on one GPUDevice. Make it with `Executor.create`.
 */
export class Executor {
  /** @private */
  constructor(plan, device) {
    this.plan = plan;
    this.device = device;
    this.buffers = [];
    this.pipelines = [];
    this.bindGroups = [];
    /** @private the plan's dispatches as a compute pass's commands (#commands) */
    this.pass = null;
    this.staging = [];
    /** @type {Map<number, {spec: object, bindGroups: GPUBindGroup[], pass: object, staging: GPUBuffer}>} k -> readout */
    this.readouts = new Map();
    this.inputRing = null; // the inputs of several calls (grown by runCalls)
    /** What calls did since load: submits, and bytes read back from the GPU. */
    this.counters = { submits: 0, readBytes: 0 };
    this.lost = null;
    this.disposed = false;
    this.timings = null;
    this.tail = Promise.resolve(); // calls run one after another (shared staging buffers)
  }

  /**
   * Create every buffer, pipeline and bind group of `plan` and upload its constants.
   * @param {string | object} plan Plan.to_json() text or object
   * @param {ArrayBuffer | ArrayBufferView | object | Array<ArrayBuffer | ArrayBufferView | object> | null} fileBytes
   *   the program file (constant ranges are uploaded from it directly), or a list: the program
   *   file, then each external data file (`.ptd`) in the order the plan was made with (a file
   *   init's `file` indexes it); null if the plan has no file-initialised buffers. A file may
   *   be a streamed source (web/sources.js: `{name, size, chunks()}`): its constants are then
   *   written as its chunks arrive (web/upload.js), and no file is held whole
   * @param {{device?: GPUDevice, gpu?: GPU, poison?: boolean, onStage?: (stage: string) => void,
   *   onBytes?: (file: number, n: number) => void}} [options]
   *   `device` to share one device between programs; `poison` fills activations/outputs with
   *   NaNs (tests); `onStage('compile')` is called when the uploads are issued and the kernels
   *   start compiling; `onBytes` counts the bytes of streamed files as they arrive
   * @returns {Promise<Executor>}
   * @throws {PlanError | AdapterError | ExternalDataError | InputError} InputError: a streamed
   *   file ended early or changed
   */
  static async create(plan, fileBytes, { device, gpu, poison = false, onStage, onBytes } = {}) {
    let files = fileBytes == null ? null : (Array.isArray(fileBytes) ? fileBytes : [fileBytes]).map(asFile);
    if (files?.some((f) => typeof f.chunks === 'function')) {
      files = files.map((f, k) => (typeof f.chunks === 'function' ? f : new BytesFile(f, `file ${k}`)));
    }
    plan = parsePlan(plan, { fileSizes: files?.map((f) => f.byteLength ?? f.size) });
    checkFeatures(plan.features, (gpu ?? globalThis.navigator?.gpu)?.wgslLanguageFeatures);
    if (device) checkLimits(plan.limits, device.limits);
    else device = await requestDevice(plan.limits, { gpu });
    checkFeatures(plan.features, null, device);
    validatePlan(plan, device.limits);
    const ex = new Executor(plan, device);
    device.lost.then((info) => { ex.lost = info; });
    // An error outside every scope (none is expected) fails this program's next call, typed.
    ex.onUncaptured = (ev) => { ex.uncaptured ??= ev.error; };
    device.addEventListener?.('uncapturederror', ex.onUncaptured);
    try {
      await ex.#build(files, onStage, onBytes);
      if (poison) ex.poison();
    } catch (err) {
      ex.dispose();
      throw err;
    }
    return ex;
  }

  async #build(files, onStage, onBytes = () => {}) {
    const { plan, device } = this;
    const t0 = performance.now();
    const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
    const streamed = files?.some((f) => typeof f.chunks === 'function');
    const fromFile = (b) => b.init?.kind === 'file' || b.init?.kind === 'file_parts';
    await this.#scoped('the buffers of the plan', () => {
      this.buffers = plan.buffers.map((b) => device.createBuffer({ size: b.size, usage, label: b.label || `b${b.id}` }));
      for (const b of plan.buffers) if (!(streamed && fromFile(b))) initialise(device, this.buffers[b.id], b, files);
      this.staging = plan.outputs.map((o) => device.createBuffer({
        size: plan.buffers[o.buffer].size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
        label: `staging ${o.buffer}`,
      }));
    });
    const meter = new HeldMeter();
    // The kernels compile while the files stream in (the browser compiles off this thread).
    const compiling = Promise.all(plan.kernels.map((k) => this.#pipeline(k)));
    compiling.catch(() => {}); // awaited below, unless the stream fails first
    if (streamed) await this.#stream(files, meter, onBytes);

    onStage?.('compile');
    const t1 = performance.now();
    this.pipelines = await compiling;
    const t2 = performance.now();
    const bindGroup = (d, i) => device.createBindGroup({
      label: `dispatch ${i} ${d.op ?? ''}`,
      layout: this.pipelines[d.kernel].getBindGroupLayout(0),
      entries: d.bindings.map((b, j) => ({
        binding: j, resource: { buffer: this.buffers[b], offset: 0, size: plan.buffers[b].size },
      })),
    });
    this.bindGroups = await this.#scoped('a bind group of the plan', () => plan.dispatches.map(bindGroup));
    this.pass = this.#commands(plan.dispatches, this.bindGroups);
    await this.#scoped('a readout of the plan', () => {
      for (const spec of plan.readouts) {
        const groups = spec.dispatches.map(bindGroup);
        this.readouts.set(spec.k, {
          spec,
          bindGroups: groups,
          pass: this.#commands(spec.dispatches, groups),
          staging: device.createBuffer({ size: spec.read_bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST, label: `readout ${spec.k}` }),
        });
      }
    });
    /**
     * Milliseconds spent at load: buffers + uploads (a streamed file's whole read), kernels
     * (compile + pipelines: what is left of it once the uploads are done), bind groups.
     */
    this.timings = {
      buffers_ms: t1 - t0, pipelines_ms: t2 - t1, bind_groups_ms: performance.now() - t2,
      // bytes of constants the loader held at once: the most, the largest file chunk, the
      // largest whole-tensor piece (a conversion's input and output)
      streamed: Boolean(streamed), largest_held: streamed ? meter.peak : Math.max(0, ...(files ?? []).map((f) => f.byteLength)),
      largest_chunk: streamed ? meter.chunk : Math.max(0, ...(files ?? []).map((f) => f.byteLength)),
      largest_piece: streamed ? meter.piece : null,
    };
  }

  /** Stream every file's chunks into the buffers their constants initialise (web/upload.js). */
  async #stream(files, meter, onBytes) {
    const all = new Set(files.keys());
    const upload = new StreamedUpload(this.device, this.buffers, this.plan.buffers, all, meter);
    for (const [k, file] of files.entries()) {
      if (!upload.segments.has(k) && file instanceof BytesFile) continue; // nothing of it is read
      for await (const { offset, bytes } of file.chunks((n) => onBytes(k, n), { meter })) {
        this.#usable();
        await upload.feed(k, offset, bytes);
      }
      upload.finish(k, file.name);
    }
  }

  /**
   * Run `fn` inside validation and out-of-memory error scopes, which are always popped (the
   * device may be shared); GPU errors become PlanError / AdapterError naming `what`.
   */
  async #scoped(what, fn) {
    const { device } = this;
    device.pushErrorScope('out-of-memory');
    device.pushErrorScope('validation');
    let out;
    let thrown = null;
    try {
      out = fn();
    } catch (err) {
      thrown = err;
    }
    let validation;
    let oom;
    try {
      [validation, oom] = await Promise.all([device.popErrorScope(), device.popErrorScope()]);
    } catch (err) {
      await this.#settleLoss();
      this.#usable();
      throw new PlanError(`the GPU did not report on ${what} (${err.message})`);
    }
    if (thrown) throw thrown;
    if (oom) throw new AdapterError(`the GPU ran out of memory for ${what} (${oom.message}); close other GPU-heavy tabs or use a smaller program`);
    if (validation) throw new PlanError(`the GPU refused ${what}: ${validation.message}`);
    return out;
  }

  async #pipeline(k) {
    // In its own error scope: a kernel that does not compile is this kernel's PlanError, not
    // an uncaptured error that a call made meanwhile (a streamed upload's) reports first.
    this.device.pushErrorScope('validation');
    const module = this.device.createShaderModule({ code: k.wgsl, label: k.name });
    const scoped = this.device.popErrorScope();
    const info = await module.getCompilationInfo();
    const invalid = await scoped;
    const errors = info.messages.filter((m) => m.type === 'error');
    if (errors.length || invalid) {
      const lines = errors.length ? errors.map((m) => `  ${m.lineNum}:${m.linePos} ${m.message}`).join('\n')
        : `  ${invalid.message}`;
      throw new PlanError(`kernel ${k.name} failed to compile:\n${lines}\n${k.wgsl}`);
    }
    try {
      return await this.device.createComputePipelineAsync({
        layout: 'auto', compute: { module, entryPoint: k.entry }, label: k.name,
      });
    } catch (err) {
      // A lost device, or Chromium's GPU side gone ('A valid external Instance reference no
      // longer exists'): the device's fault, not the plan's.
      await this.#settleLoss();
      if (err?.reason === 'internal' || /Instance reference no longer exists|device.*lost/i.test(err?.message ?? '')) {
        this.lost ??= { reason: 'unknown', message: err.message };
      }
      this.#usable();
      throw new PlanError(`kernel ${k.name} failed to make a pipeline: ${err.message}`);
    }
  }

  /** Method inputs: `[{buffer, dtype, shape, storage, name}]`. */
  get inputs() { return this.plan.inputs; }

  /** Method outputs: `[{buffer, dtype, shape, storage, name}]`. */
  get outputs() { return this.plan.outputs; }

  /**
   * Run one call: write `inputs`, dispatch the whole plan in one compute pass, read the
   * outputs (or, with `readout: k`, only the words of the plan's readout of k: k token ids
   * then k float32 logits as bits; the id alone for k = 1). Calls are serialised; state (KV
   * caches) persists until `reset()`.
   * @param {Array<ArrayBufferView | {data: ArrayBufferView, shape: number[]}>} inputs in the
   *   method's order (see `inputs`); int64 inputs may be BigInt64Array (narrowed to int32)
   * @param {{readout?: number | null}} [options]
   * @returns {Promise<ArrayBufferView[] | Uint32Array>} one TypedArray per output, of the
   *   output's dtype; the readout's words with `readout`
   * @throws {InputError | DeviceLostError | DisposedError | PlanError}
   */
  run(inputs, { readout = null } = {}) {
    return this.runCalls([inputs], { readout });
  }

  /**
   * Run several calls in order in one submit (a prompt's windows, which depend on each other
   * only through state); gives what `run` gives for the last one.
   * @param {Array<Array<ArrayBufferView | {data: ArrayBufferView, shape: number[]}>>} calls
   * @param {{readout?: number | null}} [options]
   * @returns {Promise<ArrayBufferView[] | Uint32Array>}
   * @throws {InputError | DeviceLostError | DisposedError | PlanError}
   */
  runCalls(calls, { readout = null } = {}) {
    const call = this.tail.then(() => this.#run(calls, readout));
    this.tail = call.catch(() => {});
    return call;
  }

  #inputBytes(inputs) {
    const { plan } = this;
    if (!Array.isArray(inputs) || inputs.length !== plan.inputs.length) {
      throw new InputError(`the method takes ${plan.inputs.length} inputs `
        + `(${plan.inputs.map(describeIO).join(', ')}), got ${Array.isArray(inputs) ? inputs.length : typeof inputs}`);
    }
    return inputs.map((a, i) => toStorage(a, plan.inputs[i], `input ${i}`));
  }

  /**
   * A compute pass's commands, resolved once at load so a call only replays arrays: the
   * pipeline of each dispatch (null where it is the previous dispatch's: a pass keeps its
   * pipeline, and every bind group was made for its own dispatch's pipeline), its bind group,
   * and its workgroup counts (x, y, z side by side).
   */
  #commands(dispatches, bindGroups) {
    const pipelines = dispatches.map((d, i) => (
      i > 0 && d.kernel === dispatches[i - 1].kernel ? null : this.pipelines[d.kernel]));
    const workgroups = Uint32Array.from(dispatches.flatMap((d) => d.workgroups));
    return { pipelines, bindGroups, workgroups };
  }

  async #run(calls, k) {
    this.#usable();
    const { plan, device } = this;
    if (!Array.isArray(calls) || !calls.length) throw new InputError('runCalls needs a list of calls (input lists)');
    const readout = k == null ? null : this.readouts.get(k);
    if (k != null && !readout) throw new InputError(`the plan has readouts for k in [${[...this.readouts.keys()]}], not ${k}`);
    const raws = calls.map((inputs) => this.#inputBytes(inputs));
    const t0 = performance.now();
    const before = [gpuTraffic.submits, gpuCreations.buffers, gpuCreations.bindGroups];
    await this.#scoped('the call', () => {
      const enc = device.createCommandEncoder();
      if (raws.length === 1) {
        raws[0].forEach((raw, i) => device.queue.writeBuffer(this.buffers[plan.inputs[i].buffer], 0, raw));
        encode(enc, this.pass);
      } else {
        const size = raws.flat().reduce((n, raw) => n + raw.byteLength, 0);
        if (!this.inputRing || this.inputRing.size < size) {
          this.inputRing?.destroy();
          this.inputRing = device.createBuffer({ size, usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC, label: 'inputs of several calls' });
        }
        let at = 0;
        for (const raw of raws.flat()) {
          device.queue.writeBuffer(this.inputRing, at, raw);
          at += raw.byteLength;
        }
        at = 0;
        for (const call of raws) {
          call.forEach((raw, i) => {
            enc.copyBufferToBuffer(this.inputRing, at, this.buffers[plan.inputs[i].buffer], 0, raw.byteLength);
            at += raw.byteLength;
          });
          encode(enc, this.pass);
        }
      }
      if (readout) {
        encode(enc, readout.pass);
        enc.copyBufferToBuffer(this.buffers[readout.spec.buffer], 0, readout.staging, 0, readout.spec.read_bytes);
      } else {
        plan.outputs.forEach((o, j) => enc.copyBufferToBuffer(this.buffers[o.buffer], 0, this.staging[j], 0, this.staging[j].size));
      }
      device.queue.submit([enc.finish()]);
      this.counters.submits += 1;
    });
    const t1 = performance.now();
    const staging = readout ? [readout.staging] : this.staging;
    try {
      await Promise.all(staging.map((s) => s.mapAsync(GPUMapMode.READ)));
    } catch (err) {
      await this.#settleLoss();
      this.#usable(); // a lost device or a disposed program says so
      throw new PlanError(`reading the outputs failed: ${err.message}`);
    }
    this.#usable();
    const t2 = performance.now();
    let read = 0;
    try {
      if (readout) {
        read = readout.spec.read_bytes;
        return new Uint32Array(readout.staging.getMappedRange(0, read).slice(0));
      }
      return plan.outputs.map((o, j) => {
        const n = padded(storageBytes(o));
        read += n;
        return fromStorage(this.staging[j].getMappedRange(0, n), o);
      });
    } finally {
      for (const s of staging) s.unmap();
      this.counters.readBytes += read;
      gpuTraffic.readBytes += read;
      recordCall({
        windows: calls.length, submits: gpuTraffic.submits - before[0], readBytes: read,
        buffers: gpuCreations.buffers - before[1], bindGroups: gpuCreations.bindGroups - before[2],
        encode_ms: t1 - t0, wait_ms: t2 - t1, copy_ms: performance.now() - t2,
      });
    }
  }

  /**
   * Zero the persistent state (KV caches), after the calls already made.
   * @returns {Promise<void>}
   */
  reset() {
    const done = this.tail.then(() => {
      this.#usable();
      for (const i of this.plan.state) initialise(this.device, this.buffers[i], this.plan.buffers[i], null);
    });
    this.tail = done.catch(() => {});
    return done;
  }

  /** Fill activation and output buffers with a NaN pattern (tests: catches unwritten elements). */
  poison(word = 0x7fc0dead) {
    this.#usable();
    for (const b of this.plan.buffers) {
      if (b.role === 'activation' || b.role === 'output') {
        this.device.queue.writeBuffer(this.buffers[b.id], 0, new Uint32Array(b.size / 4).fill(word));
      }
    }
  }

  /** Free every GPU resource of this program (the device stays, it may be shared). */
  dispose() {
    if (this.disposed) return;
    this.disposed = true;
    const readoutStaging = [...this.readouts.values()].map((r) => r.staging);
    for (const b of [...this.buffers, ...this.staging, ...readoutStaging]) b.destroy();
    this.inputRing?.destroy();
    this.buffers = [];
    this.staging = [];
    this.readouts.clear();
    this.inputRing = null;
    this.pipelines = [];
    this.bindGroups = [];
    this.pass = null;
    this.device.removeEventListener?.('uncapturederror', this.onUncaptured);
  }

  /** A failed map or scope may come just before `device.lost` resolves: give it a moment. */
  async #settleLoss() {
    if (this.lost) return;
    const info = await Promise.race([this.device.lost, new Promise((r) => { setTimeout(r, 1000, null); })]);
    if (info) this.lost = info;
  }

  #usable() {
    if (this.disposed) throw new DisposedError('this program was disposed; load it again');
    if (this.lost) {
      const why = this.lost.reason === 'destroyed' ? 'destroyed' : `lost (${this.lost.message || this.lost.reason})`;
      throw new DeviceLostError(`the GPU device was ${why}: a driver reset, the GPU running out of memory or the `
        + 'browser reclaiming it; what was in flight stopped. Load the program or model again (a new device is '
        + 'made); if it keeps happening, close other GPU-heavy tabs or use a smaller model');
    }
    const err = this.uncaptured;
    if (err) {
      this.uncaptured = null;
      if (globalThis.GPUOutOfMemoryError && err instanceof GPUOutOfMemoryError) {
        throw new AdapterError(`the GPU ran out of memory (${err.message}); close other GPU-heavy tabs or use a smaller program`);
      }
      throw new PlanError(`the GPU reported an error outside any call (${err.message}); load the program again`);
    }
  }
}

/** Record one compute pass of `commands` (Executor #commands) into `enc`. */
function encode(enc, commands) {
  const { pipelines, bindGroups, workgroups } = commands;
  const pass = enc.beginComputePass();
  for (let i = 0, w = 0; i < bindGroups.length; i++, w += 3) {
    const pipeline = pipelines[i];
    if (pipeline !== null) pass.setPipeline(pipeline);
    pass.setBindGroup(0, bindGroups[i]);
    pass.dispatchWorkgroups(workgroups[w], workgroups[w + 1], workgroups[w + 2]);
  }
  pass.end();
}

const padded = (n) => Math.max(4, Math.ceil(n / 4) * 4);

function asFile(x) {
  if (x && typeof x.chunks === 'function') return x; // a streamed source (web/sources.js)
  if (x instanceof ArrayBuffer) return new Uint8Array(x);
  if (ArrayBuffer.isView(x)) return new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
  throw new TypeError('program bytes must be an ArrayBuffer or a TypedArray');
}
