// The peak JS heap of a page's worker, polled over CDP while the page loads something
// (tools/run_page.mjs, tools/chat_page.mjs).

/**
 * Poll the used JS heap of the page's worker over CDP (no collection first: the peak counts
 * garbage not yet collected, as the process holds it). -> {stop: () => peak bytes}
 */
export async function heapPoller(page, everyMs = 50) {
  const cdp = await page.context().newCDPSession(page);
  let session = null;
  const pending = new Map();
  let next = 0;
  cdp.on('Target.receivedMessageFromTarget', (e) => { const m = JSON.parse(e.message); pending.get(m.id)?.(m); pending.delete(m.id); });
  const send = (method) => new Promise((ok) => {
    pending.set(++next, ok);
    cdp.send('Target.sendMessageToTarget', { sessionId: session, message: JSON.stringify({ id: next, method, params: {} }) }).catch(() => ok(null));
  });
  let peak = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      if (!session) {
        const { targetInfos } = await cdp.send('Target.getTargets');
        const worker = targetInfos.find((t) => t.type === 'worker');
        if (worker) ({ sessionId: session } = await cdp.send('Target.attachToTarget', { targetId: worker.targetId, flatten: false }));
      } else {
        const r = (await send('Runtime.getHeapUsage'))?.result ?? {};
        // usedSize: the V8 heap; backingStorageSize: ArrayBuffers' contents, outside it
        peak = Math.max(peak, (r.usedSize ?? 0) + (r.backingStorageSize ?? 0));
      }
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
  return { stop: async () => { running = false; await loop; return peak; } };
}
