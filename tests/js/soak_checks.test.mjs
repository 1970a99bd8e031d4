// The page soak's phase checks (tests/browser/soak_checks.js) fail a bad middle phase as well as a
// bad last one.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { phaseFailures } from '../browser/soak_checks.js';

const phase = (bad = 0, buffers = 40, bindGroups = 60, wasm = 1 << 24) => ({ bad, created: { buffers, bindGroups }, memory: { wasmHeapBytes: wasm } });

test('flat phases pass', () => {
  assert.deepEqual(phaseFailures({ warm: phase(), middle: phase(), end: phase() }), []);
});

test('a bad middle phase fails even when the last phase looks like the warm-up', () => {
  assert.deepEqual(phaseFailures({ warm: phase(), middle: phase(2), end: phase() }), ['middle: 2 steps gave non-finite logits']);
  assert.deepEqual(phaseFailures({ warm: phase(), middle: phase(0, 41, 60), end: phase() }), ['middle: 1 GPU buffers and 0 bind groups made after load']);
  assert.match(phaseFailures({ warm: phase(), middle: phase(0, 40, 60, 1 << 25), end: phase() })[0], /^middle: Pyodide's heap went from/);
  assert.deepEqual(phaseFailures({ warm: phase(1), middle: phase(), end: phase(0, 40, 61) }),
    ['warm-up: 1 steps gave non-finite logits', 'end: 0 GPU buffers and 1 bind groups made after load']);
});
