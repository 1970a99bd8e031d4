// A short measured choice of the decode kernel variant at load, in the page: the twin of
// py/webpte/autotune.py. Python names the candidates (planner hints) for the adapter's kind;
// each is planned, built and timed here over a few calls after a warm one, in two rounds (the
// second in reverse order), one executor at a time (each is disposed before the next is
// made), and the fastest hint is kept in the Cache API (or, where the worker has none, for
// this worker's life) under the adapter's name, the planner's fingerprint of the program
// (web_glue.plan_program), method and fusion. Every candidate computes the same int32 accumulators and epilogues, so the choice
// changes the speed, not the outputs.

import { DTYPE_ARRAYS, numel, parsePlan } from './plan.js';
import { sha256Hex } from './files.js';

const CACHE = 'webpte-autotune-v2';
const remembered = new Map();   // key -> entry, where the Cache API is missing

const entryURL = async (key) =>
  `https://webpte.invalid/autotune/${await sha256Hex(new TextEncoder().encode(key))}`;

async function readEntry(key) {
  if (remembered.has(key)) return remembered.get(key);
  try {
    const hit = await (await globalThis.caches?.open(CACHE))?.match(await entryURL(key));
    return hit ? await hit.json() : null;
  } catch {
    return null;   // a missing or damaged entry is measured again, then rewritten
  }
}

async function writeEntry(key, entry) {
  remembered.set(key, entry);
  try {
    const cache = await globalThis.caches?.open(CACHE);
    await cache?.put(await entryURL(key), new Response(JSON.stringify(entry),
      { headers: { 'content-type': 'application/json' } }));
  } catch {
    // kept for this worker's life only (storage full or unavailable)
  }
}

/** Median milliseconds of `calls` calls of a built executor on zero inputs, after a warm one. */
async function timeCalls(executor, calls) {
  const inputs = executor.plan.inputs.map((s) => {
    const Host = DTYPE_ARRAYS[s.dtype] ?? Float32Array;
    return new Host(numel(s.shape));
  });
  await executor.run(inputs);
  const times = [];
  for (let i = 0; i < calls; i++) {
    await executor.reset();
    const t = performance.now();
    await executor.run(inputs);
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}

/**
 * The planner hints ("+"-joined) of the fastest decode variant for this program on this adapter, or null
 * when the program has no few-row int8 linears or is too large to upload once per candidate.
 * Nothing here reads a program file: each candidate's executor streams it again as the load
 * does (a streamed file is never held whole), and the choice is cached under the planner's
 * fingerprint of the program (what its reader read: the same for every hint).
 * @param {{files: (ArrayBuffer | object)[], method: string, fusion: string, device: string,
 *   spec: {hints: string[], families: string[], calls: number, max_bytes: number},
 *   plan: (hint: string) => Promise<{plan: object, fingerprint: string}>,
 *   build: (parsed: object) => Promise<object>,
 *   emit: (e: object) => void}} args `plan` plans the program with these hints more, `build`
 *   makes an executor of a parsed plan; `files`: the .pte then each external data file, in
 *   memory or streamed (web/sources.js)
 * @returns {Promise<{hint: string, times_ms: Record<string, number>, calls: number,
 *   measured: string, cached: boolean} | null>}
 */
export async function tuneDecode({ files, method, fusion, device, spec, plan, build, emit }) {
  const parsed = {};
  let fingerprint = null;
  const planned = async (hint) => {
    if (!parsed[hint]) {
      const answer = await plan(hint);
      fingerprint ??= answer.fingerprint;
      parsed[hint] = parsePlan(answer.plan, { fileSizes: files.map((f) => f.byteLength ?? f.size) });
    }
    return parsed[hint];
  };
  const first = await planned(spec.hints[0]);
  const key = `${device}|${fingerprint}|${method}|${fusion}`;
  const known = await readEntry(key);
  if (known && spec.hints.includes(known.hint)) return { ...known, cached: true };
  const tuned = first.kernels.some((k) => spec.families.includes(k.name.replace(/_[^_]*$/, '')));
  const size = first.buffers.reduce((n, b) => n + b.size, 0);
  if (!tuned || size > spec.max_bytes) return null;
  // A candidate planning the same kernels as an earlier one (names hold the source's hash)
  // is timed once, under the earlier one's hint.
  const seen = new Set();
  const hints = [];
  for (const hint of spec.hints) {
    const names = (await planned(hint)).kernels.map((k) => k.name).join(' ');
    if (!seen.has(names)) { seen.add(names); hints.push(hint); }
  }
  emit({ stage: 'autotune' });
  const times = {};
  for (const order of [hints, [...hints].reverse()]) {
    for (const hint of order) {
      const executor = await build(parsed[hint]);
      try {
        times[hint] = Math.min(times[hint] ?? Infinity, await timeCalls(executor, spec.calls));
      } finally {
        executor.dispose();
      }
    }
  }
  const hint = hints.reduce((best, h) => (times[h] < times[best] ? h : best));
  const entry = {
    hint, calls: spec.calls, measured: new Date().toISOString(),
    times_ms: Object.fromEntries(hints.map((h) => [h, Math.round(times[h] * 1e3) / 1e3])),
  };
  await writeEntry(key, entry);
  return { ...entry, cached: false };
}
