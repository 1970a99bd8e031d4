// The plan validator of the page: the rules of py/webpte/plan/validate.py, run on every
// parsed plan before any device sees it (structure first: web/plan.js parsePlan).
import { PlanError } from './errors.js';

const BINDING = /@group\(\s*0\s*\)\s*@binding\(\s*(\d+)\s*\)\s*var<\s*(storage|uniform)\s*(?:,\s*(read_write|read)\s*)?>/g;
const WORKGROUP = /@workgroup_size\(([^)]*)\)/;

function fail(what) {
  throw new PlanError(`invalid plan: ${what}`);
}

/**
 * Each binding's access in binding order: 'read', 'read_write' or 'uniform'.
 * @param {string} wgsl
 * @returns {string[]}
 */
export function bindingAccess(wgsl) {
  const found = new Map();
  for (const m of wgsl.matchAll(BINDING)) {
    found.set(Number(m[1]), m[2] === 'uniform' ? 'uniform' : (m[3] ?? 'read'));
  }
  const out = [];
  for (let i = 0; i < found.size; i++) {
    if (!found.has(i)) fail(`a kernel declares bindings ${[...found.keys()].sort((a, b) => a - b)}, not 0..${found.size - 1}`);
    out.push(found.get(i));
  }
  return out;
}

/** @param {string} wgsl @returns {number[] | null} the literal @workgroup_size, padded to 3 */
export function workgroupSize(wgsl) {
  const m = WORKGROUP.exec(wgsl);
  if (!m) return null;
  const dims = m[1].split(',').map((x) => x.trim()).filter(Boolean).map((x) => x.replace(/u$/, ''));
  if (!dims.every((x) => /^(0x[0-9a-f]+|\d+)$/i.test(x))) return null;
  const n = dims.map(Number);
  while (n.length < 3) n.push(1);
  return n.slice(0, 3);
}

const camel = (snake) => snake.replace(/_([a-z])/g, (_, c) => c.toUpperCase());

/**
 * Check a parsed plan against WebGPU's rules and `limits` (GPUSupportedLimits or a plain
 * object with camelCase names; missing limits are not checked).
 * @param {object} plan a parsePlan result
 * @param {Record<string, number>} [limits]
 * @throws {PlanError} naming the dispatch and its op
 */
export function validatePlan(plan, limits = {}) {
  const lim = (snake) => limits?.[camel(snake)];
  const access = plan.kernels.map((k) => bindingAccess(k.wgsl));
  const sizes = plan.kernels.map((k) => workgroupSize(k.wgsl));
  const maxBuffer = lim('max_buffer_size');
  for (const b of plan.buffers) {
    if (maxBuffer !== undefined && b.size > maxBuffer) fail(`buffer ${b.label || b.id} holds ${b.size} bytes, the device allows ${maxBuffer} (maxBufferSize)`);
  }
  const filled = new Set(plan.buffers.filter((b) => b.init != null || b.role === 'state' || b.role === 'input').map((b) => b.id));
  for (const io of plan.inputs) filled.add(io.buffer);
  const dispatches = [...plan.dispatches, ...plan.readouts.flatMap((r) => r.dispatches)];
  dispatches.forEach((d, i) => {
    const where = `dispatch ${i} (${d.op || 'unnamed'}, node ${d.node ?? -1})`;
    const acc = access[d.kernel];
    if (d.bindings.length !== acc.length) fail(`${where} binds ${d.bindings.length} buffers, kernel ${plan.kernels[d.kernel].name} declares ${acc.length}`);
    const written = new Set(d.bindings.filter((_, j) => acc[j] === 'read_write'));
    const clash = d.bindings.filter((b, j) => acc[j] !== 'read_write' && written.has(b));
    if (clash.length) fail(`${where} binds ${plan.buffers[clash[0]].label || clash[0]} both writable and read-only (WebGPU's usage scope rule)`);
    for (const [key, kinds] of [['max_storage_buffers_per_shader_stage', ['read', 'read_write']], ['max_uniform_buffers_per_shader_stage', ['uniform']]]) {
      const count = acc.filter((a) => kinds.includes(a)).length;
      if (lim(key) !== undefined && count > lim(key)) fail(`${where} binds ${count} buffers, the device allows ${lim(key)} (${camel(key)})`);
    }
    d.bindings.forEach((b, j) => {
      const key = acc[j] === 'uniform' ? 'max_uniform_buffer_binding_size' : 'max_storage_buffer_binding_size';
      if (lim(key) !== undefined && plan.buffers[b].size > lim(key)) fail(`${where} binds ${plan.buffers[b].label || b} of ${plan.buffers[b].size} bytes, the device allows ${lim(key)} (${camel(key)})`);
      if (acc[j] !== 'read_write' && !filled.has(b)) fail(`${where} reads buffer ${plan.buffers[b].label || b} before anything writes it`);
    });
    const most = lim('max_compute_workgroups_per_dimension');
    if (d.workgroups.some((w) => w < 1 || (most !== undefined && w > most))) fail(`${where} dispatches ${JSON.stringify(d.workgroups)} workgroups, each count must be 1..${most}`);
    const size = sizes[d.kernel];
    if (size) {
      ['x', 'y', 'z'].forEach((axis, j) => {
        const key = `max_compute_workgroup_size_${axis}`;
        if (lim(key) !== undefined && size[j] > lim(key)) fail(`${where}: kernel workgroup size ${size} exceeds ${camel(key)} ${lim(key)}`);
      });
      const key = 'max_compute_invocations_per_workgroup';
      if (lim(key) !== undefined && size[0] * size[1] * size[2] > lim(key)) fail(`${where}: kernel workgroup size ${size} exceeds ${camel(key)} ${lim(key)}`);
    }
    for (const b of written) filled.add(b);
  });
  for (const io of plan.outputs) {
    if (!filled.has(io.buffer) && io.shape.every((d) => d > 0)) fail(`output buffer ${plan.buffers[io.buffer].label || io.buffer} is never written`);
  }
}
