// Numbers as the page shows them: bytes, time left, rates, load stages, generation stats.

/** 1234567 -> "1.2 MB" (decimal units, like download managers). */
export function formatBytes(n) {
  if (!Number.isFinite(n) || n < 0) return '?';
  const units = ['B', 'kB', 'MB', 'GB'];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) { n /= 1000; i++; }
  return `${i === 0 ? n : n.toFixed(n < 10 ? 1 : 0)} ${units[i]}`;
}

/** Seconds left -> "about 12 s left" / "about 3 min left"; '' when unknown. */
export function formatEta(seconds) {
  if (!Number.isFinite(seconds) || seconds < 0) return '';
  if (seconds < 1) return 'almost done';
  if (seconds < 90) return `about ${Math.round(seconds)} s left`;
  return `about ${Math.round(seconds / 60)} min left`;
}

/** Tokens per second with sensible precision: 0.42, 6.1, 123. */
export function formatRate(x) {
  if (!Number.isFinite(x) || x <= 0) return '–';
  return x < 1 ? x.toFixed(2) : x < 100 ? x.toFixed(1) : String(Math.round(x));
}

const STAGES = {
  fetch: 'Downloading',
  verify: 'Checking sha256 of',
  python: 'Starting Python (Pyodide)',
  plan: 'Planning the GPU program',
  upload: 'Uploading weights to the GPU',
  compile: 'Compiling GPU kernels',
  ready: 'Ready',
};

/**
 * One progress event of loadModel as `{label, detail, fraction}`; fraction is null when the
 * stage has no known size.
 * @param {{stage: string, file?: string, loaded?: number, total?: number, etaSeconds?: number}} ev
 */
export function describeProgress(ev) {
  const verb = STAGES[ev.stage] ?? ev.stage;
  const label = ev.file && (ev.stage === 'fetch' || ev.stage === 'verify') ? `${verb} ${ev.file}`
    : ev.file ? `${verb} (${ev.file})` : verb;
  const sized = Number.isFinite(ev.total) && ev.total > 0;
  const parts = [];
  if (sized) parts.push(`${formatBytes(ev.loaded ?? 0)} of ${formatBytes(ev.total)}`);
  else if (Number.isFinite(ev.loaded) && ev.loaded > 0) parts.push(formatBytes(ev.loaded));
  const eta = formatEta(ev.etaSeconds);
  if (eta && ev.stage !== 'ready') parts.push(eta);
  return {
    label,
    detail: parts.join(' · '),
    fraction: sized ? Math.min(1, (ev.loaded ?? 0) / ev.total) : null,
  };
}

const STOPS = {
  stop_token: 'end of answer',
  max_new_tokens: 'token limit reached',
  context_full: 'context full: start a new conversation',
  aborted: 'stopped',
};

/** The stats line under an answer, from generate()'s `done` event. */
export function describeDone(done) {
  const picture = done.visionSeconds > 0 ? `picture ${done.visionSeconds.toFixed(1)} s · ` : '';
  const prefill = `${picture}prefill ${done.computedRows} of ${done.promptRows} rows at `
    + `${formatRate(done.prefillTokensPerSecond)} tok/s`;
  const decode = `decode ${done.newTokens} tokens at ${formatRate(done.decodeTokensPerSecond)} tok/s`;
  const reused = done.reusedRows ? ` · ${done.reusedRows} rows reused` : '';
  const stop = STOPS[done.stopReason] ?? done.stopReason ?? '';
  return `${prefill} · ${decode}${reused}${stop ? ` · ${stop}` : ''}`;
}

/**
 * One model folder kept in the browser's cache (webpte's listCachedModels) as `{title, detail}`.
 * @param {{base: string, name: string | null, files: object[], bytes: number, complete: boolean}} m
 */
export function describeCachedModel(m) {
  const n = m.files.length;
  const files = `${formatBytes(m.bytes)} in ${n} file${n === 1 ? '' : 's'}${m.complete ? '' : ' (incomplete)'}`;
  return { title: m.name ?? 'Model files', detail: `${files} · ${m.base}` };
}
