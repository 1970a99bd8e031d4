// Constants streamed into their GPU buffers: a program file arrives as bounded chunks in file
// order (web/sources.js) and each chunk's bytes are written straight into the buffers whose
// file inits cover them (queue.writeBuffer of sub-ranges). An init that needs its whole
// tensor first (a conversion, an interleave, parts not aligned to 4 bytes) holds that
// tensor's bytes only until they are all in. `meter` counts what the loader holds.

import { InputError, PlanError } from './errors.js';
import { fileBytes, interleaveRows } from './plan.js';

const UPLOAD_CHUNK = 16 << 20; // bytes per writeBuffer: bounds the driver's staging copies
const DRAIN_EVERY = 64 << 20; // bytes written between waits for the queue: bounds its staging

/** The most bytes of constants the loader held at once (tests and stats read it). */
export class HeldMeter {
  constructor() {
    this.now = 0;
    this.peak = 0;
    /** the largest file chunk, and the largest whole-tensor piece (with its converted copy) */
    this.chunk = 0;
    this.piece = 0;
  }

  /** @param {number} n @param {'chunk' | 'piece'} [kind] */
  hold(n, kind = 'chunk') {
    this.now += n;
    this.peak = Math.max(this.peak, this.now);
    if (kind === 'chunk') this.chunk = Math.max(this.chunk, n);
  }

  release(n) { this.now -= n; }
}

/** int64 file bytes as int32 words; a value outside int32 is a PlanError, not a wrap. */
export function narrowI64(src, label) {
  const n = Math.floor(src.byteLength / 8);
  const wide = new DataView(src.buffer, src.byteOffset, n * 8);
  const out = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const v = wide.getBigInt64(i * 8, true);
    if (v < -2147483648n || v > 2147483647n) {
      throw new PlanError(`buffer ${label}: an int64 constant holds ${v}, outside int32; webpte stores int64 as int32`);
    }
    out[i] = Number(v);
  }
  return new Uint8Array(out.buffer);
}

/** A file init's bytes (the parts back to back) -> what its buffer holds, padded to 4 bytes. */
export function convertInit(init, src, label) {
  if (init.kind === 'file_parts' && init.interleave !== undefined) src = interleaveRows(src, init.interleave);
  if (init.convert === 'u8_to_u32') src = new Uint8Array(Uint32Array.from(src).buffer);
  else if (init.convert === 'i64_to_i32') src = narrowI64(src, label);
  if (src.byteLength % 4) {
    const padded = new Uint8Array(Math.ceil(src.byteLength / 4) * 4);
    padded.set(src);
    src = padded;
  }
  return src;
}

/** Write `src` to `target` at `offset` in writes of at most UPLOAD_CHUNK bytes (all multiples of 4). */
export function writeChunked(queue, target, offset, src) {
  for (let at = 0; at < src.byteLength; at += UPLOAD_CHUNK) {
    queue.writeBuffer(target, offset + at, src, at, Math.min(UPLOAD_CHUNK, src.byteLength - at));
  }
}

/** The (file, offset, nbytes, at) pieces of a file init: `at` is the piece's place in the init's bytes. */
function piecesOf(init) {
  if (init.kind === 'file') return [{ file: init.file ?? 0, offset: init.offset, nbytes: init.nbytes, at: 0 }];
  let at = 0;
  return init.parts.map((p) => {
    const piece = { file: p.file ?? 0, offset: p.offset, nbytes: p.nbytes, at };
    at += p.nbytes;
    return piece;
  });
}

/** Whether an init's bytes go to its buffer as they are, at 4-byte aligned places. */
function direct(init) {
  if (init.convert != null || init.interleave !== undefined) return false;
  return piecesOf(init).every((p) => p.at % 4 === 0);
}

/**
 * Streams the file inits of a plan's buffers into them. `feed(file, offset, bytes)` takes
 * each file's chunks in file order; `finish()` checks every init got all its bytes.
 */
export class StreamedUpload {
  /**
   * @param {GPUDevice} device @param {GPUBuffer[]} buffers the plan's, by id
   * @param {object[]} planBuffers plan.buffers @param {Set<number>} streamed file indexes that are streamed
   * @param {HeldMeter} meter
   */
  constructor(device, buffers, planBuffers, streamed, meter) {
    this.queue = device.queue;
    this.meter = meter;
    this.written = 0;
    /** @type {Map<number, object[]>} file -> its segments, by file offset */
    this.segments = new Map();
    for (const b of planBuffers) {
      const init = b.init;
      if (init?.kind !== 'file' && init?.kind !== 'file_parts') continue;
      const pieces = piecesOf(init);
      if (!pieces.some((p) => streamed.has(p.file))) continue;
      const whole = direct(init) ? null
        : { init, target: buffers[b.id], label: b.label || b.id, need: fileBytes(init), got: 0, bytes: null };
      for (const p of pieces) {
        if (!this.segments.has(p.file)) this.segments.set(p.file, []);
        this.segments.get(p.file).push({
          start: p.offset, end: p.offset + p.nbytes, at: p.at, target: buffers[b.id], whole, carry: null, done: 0,
        });
      }
    }
    for (const list of this.segments.values()) list.sort((a, b) => a.start - b.start);
    this.next = new Map([...this.segments.keys()].map((f) => [f, 0]));
    this.active = new Map([...this.segments.keys()].map((f) => [f, []]));
  }

  /**
   * Write the bytes of file `file` at `offset` (chunks arrive in file order) to the buffers
   * they initialise. Resolves once the queue took them (it waits for the queue every
   * DRAIN_EVERY bytes, so its staging stays bounded).
   * @param {number} file @param {number} offset @param {Uint8Array} bytes
   */
  async feed(file, offset, bytes) {
    const list = this.segments.get(file);
    if (!list) return;
    const end = offset + bytes.byteLength;
    let k = this.next.get(file);
    const active = this.active.get(file);
    while (k < list.length && list[k].start < end) active.push(list[k++]);
    this.next.set(file, k);
    for (const seg of active) {
      const a = Math.max(seg.start, offset);
      const b = Math.min(seg.end, end);
      if (b > a) this.#write(seg, a - seg.start, bytes.subarray(a - offset, b - offset));
    }
    this.active.set(file, active.filter((s) => s.end > end));
    if (this.written >= DRAIN_EVERY) {
      this.written = 0;
      await this.queue.onSubmittedWorkDone();
    }
  }

  /** Bytes `data` of a segment, from its byte `from` on (in order). */
  #write(seg, from, data) {
    seg.done += data.byteLength;
    const whole = seg.whole;
    if (whole) {
      if (!whole.bytes) {
        whole.bytes = new Uint8Array(whole.need);
        this.meter.hold(whole.need, 'piece');
      }
      whole.bytes.set(data, seg.at + from);
      whole.got += data.byteLength;
      if (whole.got === whole.need) {
        const src = convertInit(whole.init, whole.bytes, whole.label);
        if (src !== whole.bytes) this.meter.hold(src.byteLength, 'piece');
        this.meter.piece = Math.max(this.meter.piece, whole.need + (src !== whole.bytes ? src.byteLength : 0));
        writeChunked(this.queue, whole.target, 0, src);
        this.written += src.byteLength;
        if (src !== whole.bytes) this.meter.release(src.byteLength);
        this.meter.release(whole.need);
        whole.bytes = null;
      }
      return;
    }
    let pos = seg.at + from; // where data[0] goes in the buffer
    let rest = data;
    if (seg.carry) { // the bytes of a word begun in the previous chunk
      const take = Math.min(4 - seg.carry.n, rest.byteLength);
      seg.carry.word.set(rest.subarray(0, take), seg.carry.n);
      seg.carry.n += take;
      rest = rest.subarray(take);
      pos += take;
      if (seg.carry.n === 4) {
        this.queue.writeBuffer(seg.target, seg.carry.pos, seg.carry.word);
        seg.carry = null;
      }
    }
    const n = rest.byteLength & ~3;
    if (n) writeChunked(this.queue, seg.target, pos, rest.subarray(0, n));
    this.written += n;
    if (n < rest.byteLength) seg.carry = { word: new Uint8Array(4), n: 0, pos: pos + n };
    if (seg.carry && rest.byteLength > n) {
      seg.carry.word.set(rest.subarray(n), 0);
      seg.carry.n = rest.byteLength - n;
    }
    if (seg.done === seg.end - seg.start && seg.carry) { // the last word: zero-padded
      this.queue.writeBuffer(seg.target, seg.carry.pos, seg.carry.word);
      seg.carry = null;
    }
  }

  /**
   * Check that every segment of `file` got its bytes (a file that ended early leaves some short).
   * @param {number} file @param {string} name for the message
   * @throws {InputError}
   */
  finish(file, name) {
    const short = (this.segments.get(file) ?? []).find((s) => s.done !== s.end - s.start);
    if (short) {
      throw new InputError(`${name} ended before the constants at bytes ${short.start}..${short.end} `
        + 'were all read; the file is cut or is not the file that was planned: load it again');
    }
  }
}

/**
 * Initialise buffer `target` of plan buffer `b` from its init: zeros, words, or file bytes
 * (`files`: each file's bytes in memory, the program's first), converted as the init says.
 */
export function initialise(device, target, b, files) {
  const init = b.init;
  if (init == null) return;
  if (init.kind === 'zeros') {
    const enc = device.createCommandEncoder();
    enc.clearBuffer(target);
    device.queue.submit([enc.finish()]);
    return;
  }
  if (init.kind === 'words') { // per-dispatch scalars, little endian u32
    device.queue.writeBuffer(target, 0, Uint32Array.from(init.words));
    return;
  }
  if (!files) throw new PlanError(`buffer ${b.label || b.id} needs file bytes; load with the program data`);
  let src;
  if (init.kind === 'file_parts') {
    src = new Uint8Array(fileBytes(init));
    let at = 0;
    for (const p of init.parts) {
      src.set(files[p.file ?? 0].subarray(p.offset, p.offset + p.nbytes), at);
      at += p.nbytes;
    }
  } else {
    src = files[init.file ?? 0].subarray(init.offset, init.offset + init.nbytes);
  }
  writeChunked(device.queue, target, 0, convertInit(init, src, b.label || b.id));
}
