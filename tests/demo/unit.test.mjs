// The demo's pure modules in node: formatting, error advice, model folder recognition.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { describeCapabilityCheck } from '../../demo/capabilities.js';
import { describeCachedModel, describeDone, describeProgress, formatBytes, formatEta, formatRate } from '../../demo/format.js';
import { describeCapabilities, describeError } from '../../demo/messages.js';
import { describeFolder, relativePath } from '../../demo/sources.js';

/** An error as webpte's typed errors arrive: the class name in `name`. */
function typed(name, message) {
  return Object.assign(new Error(message), { name });
}

test('bytes, time left and rates read well', () => {
  assert.equal(formatBytes(0), '0 B');
  assert.equal(formatBytes(999), '999 B');
  assert.equal(formatBytes(1234), '1.2 kB');
  assert.equal(formatBytes(138066180), '138 MB');
  assert.equal(formatBytes(-1), '?');
  assert.equal(formatEta(undefined), '');
  assert.equal(formatEta(0.2), 'almost done');
  assert.equal(formatEta(12.4), 'about 12 s left');
  assert.equal(formatEta(600), 'about 10 min left');
  assert.equal(formatRate(0.4234), '0.42');
  assert.equal(formatRate(6.123), '6.1');
  assert.equal(formatRate(123.4), '123');
  assert.equal(formatRate(0), '–');
  assert.equal(formatRate(NaN), '–');
});

test('progress events say what is happening, with bytes and time left', () => {
  const ev = describeProgress({ stage: 'fetch', file: 'decoder_q8.pte', loaded: 45e6, total: 138e6, etaSeconds: 12 });
  assert.deepEqual(ev, { label: 'Downloading decoder_q8.pte', detail: '45 MB of 138 MB · about 12 s left', fraction: 45 / 138 });
  assert.deepEqual(describeProgress({ stage: 'plan' }), { label: 'Planning the GPU program', detail: '', fraction: null });
  assert.equal(describeProgress({ stage: 'compile', loaded: 3, total: 10 }).fraction, 0.3);
  assert.equal(describeProgress({ stage: 'something-new' }).label, 'something-new');
});

test('the stats line of an answer', () => {
  const done = { promptRows: 37, reusedRows: 0, computedRows: 37, newTokens: 7, prefillTokensPerSecond: 6.1, decodeTokensPerSecond: 1.72, stopReason: 'stop_token' };
  assert.equal(describeDone(done), 'prefill 37 of 37 rows at 6.1 tok/s · decode 7 tokens at 1.7 tok/s · end of answer');
  assert.match(describeDone({ ...done, reusedRows: 30, stopReason: 'context_full' }), /30 rows reused · context full: start a new conversation$/);
  assert.match(describeDone({ ...done, visionSeconds: 2.345 }), /^picture 2\.3 s · prefill 37 of 37 rows/);
  assert.match(describeDone({ ...done, visionSeconds: 0 }), /^prefill /);
});

test('every typed error gets a title and what to do, keeping its own message', () => {
  const cases = [
    [typed('HashMismatchError', 'decoder_q8.pte does not match'), /checksum/, /download it afresh/],
    [typed('PteFormatError', 'file identifier is "xxxx"'), /not a valid ExecuTorch program/, /truncated/],
    [typed('NoWebGPUError', 'no adapter'), /WebGPU is not available/, /enable-unsafe-webgpu/],
    [typed('InputError', 'fetching x gave HTTP 404'), /not accepted/, /model source/],
  ];
  for (const [err, title, todo] of cases) {
    const d = describeError(err);
    assert.equal(d.name, err.name);
    assert.match(d.title, title);
    assert.match(d.todo, todo);
    assert.equal(d.message, err.message);
  }
  for (const name of ['AdapterLimitsError', 'ContextFullError', 'QuotaError', 'ModelFolderError', 'DeviceLostError', 'WorkerError']) {
    const d = describeError({ name, message: 'x' });
    assert.ok(d.title && d.todo && d.title !== describeError(new Error('x')).title, name);
  }
  const limits = describeError({ name: 'AdapterLimitsError', message: 'too big', limit: 'maxBufferSize', needed: 2, allowed: 1 });
  assert.equal(limits.message, 'too big (maxBufferSize: needs 2, the adapter allows 1)');
  assert.match(describeError({ name: 'ModelFolderError', message: 'not usable', problems: ['missing a', 'missing b'] }).message, /missing a; missing b/);
  assert.match(describeError(new TypeError('boom')).title, /Something went wrong/);
  const noGPU = describeCapabilities({ webgpu: false, problems: ['navigator.gpu is missing'] });
  assert.equal(noGPU.name, 'NoWebGPUError');
  assert.equal(noGPU.message, 'navigator.gpu is missing');
  const insecure = describeCapabilities({ webgpu: true, problems: ['not a secure context', 'crypto.subtle is missing'] });
  assert.match(insecure.title, /cannot run/);
  assert.equal(insecure.message, 'not a secure context; crypto.subtle is missing');
});

function picked(path, text = '') {
  const file = new File([text], path.split('/').pop());
  Object.defineProperty(file, 'webkitRelativePath', { value: path });
  return file;
}

test('a picked folder is recognised from its meta file or the published SmolVLM names', async () => {
  assert.equal(relativePath(picked('smollm2/tokenizer/tokenizer.json')), 'tokenizer/tokenizer.json');
  assert.equal(relativePath(new File([''], 'loose.json')), 'loose.json');
  const text = await describeFolder([
    picked('smollm2/webpte_model.json', JSON.stringify({ name: 'SmolLM2 q8', vision: null })),
    picked('smollm2/decoder_q8.pte', 'xxxx'),
  ]);
  assert.deepEqual({ ...text, files: text.files.length }, { folder: 'smollm2', files: 2, bytes: 39, name: 'SmolLM2 q8', vision: false, problem: null });
  const vlm = await describeFolder([picked('vlm/vlm_meta.json', '{}'), picked('vlm/smolvlm_decoder_q8.pte')]);
  assert.equal(vlm.vision, true);
  assert.equal(vlm.problem, null);
  assert.match((await describeFolder([picked('photos/cat.jpg')])).problem, /neither webpte_model.json nor/);
  assert.match((await describeFolder([picked('m/webpte_model.json', '{')])).problem, /not valid JSON/);
});

test('the capability check reads as a status line and facts', () => {
  const caps = {
    webgpu: true,
    adapter: { vendor: 'google', architecture: 'swiftshader', device: '', description: '', isFallbackAdapter: true },
    limits: { maxBufferSize: 1073741824, maxStorageBufferBindingSize: 134217728, maxComputeInvocationsPerWorkgroup: 256 },
    features: ['subgroups', 'timestamp-query'],
    wgslFeatures: ['packed_4x8_integer_dot_product'],
    problems: [],
    warnings: ['the WebGPU adapter is a software fallback: generation will be slow'],
  };
  const check = describeCapabilityCheck(caps);
  assert.equal(check.ok, true);
  assert.equal(check.tone, 'warn');
  assert.deepEqual(check.facts, [
    ['Adapter', 'google swiftshader (software fallback)'],
    ['Limits', 'max buffer 1.1 GB · max storage binding 134 MB · invocations per workgroup 256'],
    ['Helpful', '✓ int8 dot products · ✗ f16 · ✓ subgroups'],
  ]);
  assert.deepEqual(check.all, [['Features', 'subgroups, timestamp-query'], ['WGSL', 'packed_4x8_integer_dot_product']]);
  assert.equal(describeCapabilityCheck({ ...caps, warnings: [] }).status, '✓ WebGPU is available.');
  assert.equal(describeCapabilityCheck({ webgpu: false, problems: ['no navigator.gpu'] }).ok, false);
  assert.equal(describeCapabilityCheck({ ...caps, problems: ['not a secure context'] }).ok, false);
});

test('a model kept in the browser\'s cache reads as its name, size, file count and URL', () => {
  const files = [{ name: 'decoder_q8.pte', bytes: 138066180 }, { name: 'tokenizer/tokenizer.json', bytes: 2104556 }];
  assert.deepEqual(describeCachedModel({ base: 'http://127.0.0.1:8000/models/smollm2/', name: 'SmolLM2', files, bytes: 140170736, complete: true }),
    { title: 'SmolLM2', detail: '140 MB in 2 files · http://127.0.0.1:8000/models/smollm2/' });
  assert.deepEqual(describeCachedModel({ base: 'https://h/m/', name: null, files: files.slice(0, 1), bytes: 999, complete: false }),
    { title: 'Model files', detail: '999 B in 1 file (incomplete) · https://h/m/' });
});
