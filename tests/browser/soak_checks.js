// The per-phase checks of the page soak (tests/browser/soak.test.mjs), apart from the browser so
// node shows that they fail on a bad phase (tests/js/soak_checks.test.mjs).

/**
 * What went wrong in a soak's phases of decode steps, the first being the warm-up: a step with
 * non-finite logits in any phase; after the warm-up, any GPU buffer or bind group made or any
 * growth of Pyodide's heap (Python is not on the step path).
 * @param {Record<string, {bad: number, created: {buffers: number, bindGroups: number},
 *   memory: {wasmHeapBytes: number | null}}>} phases the state after each phase, in order
 * @returns {string[]} empty when every phase passes
 */
export function phaseFailures(phases) {
  const [[, warm], ...later] = Object.entries(phases);
  const failures = warm.bad ? [`warm-up: ${warm.bad} steps gave non-finite logits`] : [];
  for (const [name, p] of later) {
    if (p.bad) failures.push(`${name}: ${p.bad} steps gave non-finite logits`);
    const buffers = p.created.buffers - warm.created.buffers;
    const bindGroups = p.created.bindGroups - warm.created.bindGroups;
    if (buffers || bindGroups) failures.push(`${name}: ${buffers} GPU buffers and ${bindGroups} bind groups made after load`);
    if (p.memory.wasmHeapBytes !== warm.memory.wasmHeapBytes) {
      failures.push(`${name}: Pyodide's heap went from ${warm.memory.wasmHeapBytes} to ${p.memory.wasmHeapBytes} bytes`);
    }
  }
  return failures;
}
