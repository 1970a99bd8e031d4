// The memory Chromium's processes hold while a page loads something (tools/run_page.mjs):
// polled from /proc (Linux), the proportional set size (Pss: shared pages split among the
// processes that map them, so the sum is the browser's share of RAM), by process type.

import { readFileSync, readdirSync } from 'node:fs';

/** Pss in bytes of every Chromium process now, by `--type=` (the browser process: 'browser'). */
export function chromiumPss(binary = '/usr/lib/chromium/chromium') {
  const out = {};
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      // (Chromium's children rewrite their title: one string of space-separated words)
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').flatMap((a) => a.split(' '));
      if (argv[0] !== binary) continue;
      const type = argv.find((a) => a.startsWith('--type='))?.slice(7) ?? 'browser';
      const pss = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
      if (pss) out[type] = (out[type] ?? 0) + 1024 * Number(pss[1]);
    } catch { /* the process ended meanwhile */ }
  }
  return out;
}

/** Poll chromiumPss every `everyMs`: {stop: () => {total, byType}} at the moment the total peaked. */
export function pssPoller(everyMs = 200) {
  let peak = { total: 0, byType: {} };
  const poll = () => {
    const byType = chromiumPss();
    const total = Object.values(byType).reduce((a, b) => a + b, 0);
    if (total > peak.total) peak = { total, byType };
  };
  poll();
  const timer = setInterval(poll, everyMs);
  return { stop: () => { clearInterval(timer); poll(); return peak; } };
}
