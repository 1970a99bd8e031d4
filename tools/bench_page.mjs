// The page half of `webpte bench --roofline --adapters ...,page`: headless Chromium (WebGPU on
// SwiftShader) runs plans that Python made, and prints what it measured as one JSON line.
//   node tools/bench_page.mjs features     -> {"features": [...], "adapter": {...}}
//   node tools/bench_page.mjs serve JOB.json: one call per stdin line (see serve below)
//   node tools/bench_page.mjs run JOB.json -> {"probes": {name: best_s}, "programs": [{call_s:
//     {variant: [...]}, host_ms: {variant: {encode, wait, copy, worker}[]}, family_s: {variant:
//     {family: s}}}]}
// JOB.json (py/webpte/bench_page.py writes it): {"dir": folder served as /job/, "tries": n,
// "probes": [{"name", "plan"}], "programs": [{"pte", "plans": {variant: file}, "inputs":
// [{"file", "dtype", "shape"}], "calls", "families": {variant: {family: [dispatch index]}}}]}
// with every file name relative to dir. Probes run
// with an empty program (their buffers start zeroed); programs are reset before each timed call.
// host_ms splits each timed call by the worker executor's own clock (runtimeInfo().calls):
// encode (inputs written, passes recorded, submitted), wait (until the read back is mapped: the
// GPU's work), copy (out of the mapped range) and worker (the rest: the request's messages).
// family_s: each kernel family's dispatches alone in one submit, on an Executor in the page
// (as py/webpte/roofline.py family_times does natively): the best of `tries`, less an empty
// submit's.
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSuitePage } from '../tests/browser/browser.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

async function main([command, jobPath]) {
  if (command !== 'features' && !((command === 'run' || command === 'serve') && jobPath)) {
    throw new Error('usage: node tools/bench_page.mjs features | run JOB.json | serve JOB.json');
  }
  const job = command === 'features' ? null : JSON.parse(readFileSync(jobPath, 'utf8'));
  const mounts = { '/dist/': join(ROOT, 'dist'), '/suite/': join(ROOT, 'tests', 'browser') };
  if (job) mounts['/job/'] = job.dir;
  const s = await openSuitePage(mounts);
  try {
    const local = () => {
      if (s.blocked.length) throw new Error(`the page asked for non-local URLs: ${s.blocked.join(', ')}`);
    };
    if (command === 'serve') {
      await serve(s.page, job);
      local();
      return;
    }
    if (job) await s.page.evaluate(loadJob, job);
    const result = job ? await s.page.evaluate(runJob, job) : await s.page.evaluate(features);
    local();
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } finally {
    await s.close();
  }
}

async function features() {
  const adapter = await navigator.gpu.requestAdapter();
  const info = adapter?.info ?? {};
  // What a page load tells the planner (WGSL features and adapter_type:CPU|GPU), so the
  // bench plans the page's kernel variants.
  const { planFeatures } = await import('/dist/runtime.js');
  return {
    features: await planFeatures(),
    adapter: { vendor: info.vendor, architecture: info.architecture, device: info.device, description: info.description },
  };
}

// Runs in the page (playwright sends its source, so helpers live inside): every timing is
// performance.now() around an awaited run, which ends when the outputs are read back, as the
// native Executor.run does.
async function runJob(job) {
  const { webpte } = window.suite;
  const get = async (name, as) => {
    const r = await fetch(`/job/${name}`);
    if (!r.ok) throw new Error(`/job/${name}: HTTP ${r.status}`);
    return as === 'text' ? r.text() : r.arrayBuffer();
  };
  const out = { probes: {}, programs: [] };
  // Seconds of each family's dispatches in one submit, waited for with onSubmittedWorkDone.
  async function familyTimes(plan, bytes, inputs, families, tries) {
    const ex = await webpte.Executor.create(plan, bytes);
    try {
      await ex.run(inputs);   // compiles every pipeline, leaves the activations of a call
      const { device } = ex;
      const submit = async (indices) => {
        const t = performance.now();
        const enc = device.createCommandEncoder();
        const pass = enc.beginComputePass();
        for (const i of indices) {
          const d = ex.plan.dispatches[i];
          pass.setPipeline(ex.pipelines[d.kernel]);
          pass.setBindGroup(0, ex.bindGroups[i]);
          pass.dispatchWorkgroups(...d.workgroups);
        }
        pass.end();
        device.queue.submit([enc.finish()]);
        await device.queue.onSubmittedWorkDone();
        return (performance.now() - t) / 1e3;
      };
      const best = async (indices) => {
        let b = Infinity;
        for (let i = 0; i < tries; i++) b = Math.min(b, await submit(indices));
        return b;
      };
      const overhead = await best([]);
      const secs = {};
      for (const [name, indices] of Object.entries(families)) secs[name] = Math.max(0, (await best(indices)) - overhead);
      return secs;
    } finally {
      ex.dispose();
      ex.device.destroy();
    }
  }
  for (const probe of job.probes) {
    const p = await webpte.loadProgram(new Uint8Array(0), { plan: await get(probe.plan, 'text'), preflight: false });
    await p.run([]);
    let best = Infinity;
    for (let i = 0; i < job.tries; i++) {
      const t = performance.now();
      await p.run([]);
      best = Math.min(best, performance.now() - t);
    }
    out.probes[probe.name] = best / 1e3;
    await p.dispose();
  }
  for (const [index, prog] of job.programs.entries()) {
    const { loaded, inputs, bytes } = window.benchPrograms[index];   // loadJob's
    const times = Object.fromEntries(Object.keys(loaded).map((v) => [v, []]));
    const host = Object.fromEntries(Object.keys(loaded).map((v) => [v, []]));
    for (let i = 0; i < prog.calls; i++) {
      for (const [variant, p] of Object.entries(loaded)) {   // variants alternate call by call
        await p.reset();
        const t = performance.now();
        await p.run(inputs);
        const ms = performance.now() - t;
        times[variant].push(ms / 1e3);
        const { encode_ms: encode, wait_ms: wait, copy_ms: copy } = (await webpte.runtimeInfo()).calls.at(-1);
        host[variant].push({ encode, wait, copy, worker: ms - encode - wait - copy });
      }
    }
    for (const p of Object.values(loaded)) await p.dispose();
    const families = {};
    for (const [variant, file] of Object.entries(prog.plans)) {
      families[variant] = await familyTimes(await get(file, 'text'), bytes, inputs, prog.families[variant], job.tries);
    }
    out.programs.push({ call_s: times, host_ms: host, family_s: families });
  }
  return out;
}

// `serve`: the job's programs stay loaded in the page and each stdin line "P VARIANT" runs
// one call of program P's plan VARIANT (reset first), answered by a line {"s": seconds}, so a
// driver can alternate page and native calls one by one (py/webpte/bench_page.py paired).
// "ready" is printed once everything is loaded and compiled; end of input closes the page.
async function serve(page, job) {
  await page.evaluate(loadJob, job);
  process.stdout.write('{"ready": true}\n');
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    const [prog, variant] = line.trim().split(' ');
    if (prog === undefined || prog === '') continue;
    const s = await page.evaluate(callOnce, { prog: Number(prog), variant });
    process.stdout.write(`${JSON.stringify({ s })}\n`);
  }
}

async function loadJob(job) {
  const { webpte } = window.suite;
  const ARRAYS = { float32: Float32Array, int32: Int32Array, int64: BigInt64Array, int8: Int8Array, uint8: Uint8Array, bool: Uint8Array };
  const get = async (name, as) => {
    const r = await fetch(`/job/${name}`);
    if (!r.ok) throw new Error(`/job/${name}: HTTP ${r.status}`);
    return as === 'text' ? r.text() : r.arrayBuffer();
  };
  window.benchPrograms = [];
  for (const prog of job.programs) {
    const bytes = await get(prog.pte);
    const inputs = await Promise.all(prog.inputs.map(async (t) => ({ data: new ARRAYS[t.dtype](await get(t.file)), shape: t.shape })));
    const loaded = {};
    for (const [variant, file] of Object.entries(prog.plans)) {
      loaded[variant] = await webpte.loadProgram(bytes.slice(0), { plan: await get(file, 'text'), preflight: false });
      await loaded[variant].run(inputs);   // compiles every pipeline
    }
    window.benchPrograms.push({ loaded, inputs, bytes });
  }
}

async function callOnce({ prog, variant }) {
  const { loaded, inputs } = window.benchPrograms[prog];
  const p = loaded[variant];
  await p.reset();
  const t = performance.now();
  await p.run(inputs);
  return (performance.now() - t) / 1e3;
}

main(process.argv.slice(2)).catch((err) => {
  process.stderr.write(`${err?.stack ?? err}\n`);
  process.exit(1);
});
