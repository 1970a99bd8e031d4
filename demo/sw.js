// The demo's service worker: keeps the site's own files (page, webpte runtime, Pyodide,
// wheels, the bundled model's meta file) so the page opens offline. Model files are not its
// business: loadModel keeps them in Cache Storage itself. Network first, so a fresh deploy shows at once; the cache
// answers when the network does not. VERSION and FILES are written by demo/build.mjs.

const VERSION = 'dev';
const FILES = [];

const PREFIX = 'webpte-demo-';
const CACHE = PREFIX + VERSION;
const SCOPE = new URL('./', self.location.href);
const KEPT = new Set(FILES.map((f) => new URL(f, SCOPE).href));

self.addEventListener('install', (event) => {
  event.waitUntil(caches.open(CACHE).then((c) => c.addAll(FILES)).then(() => self.skipWaiting()));
});

self.addEventListener('activate', (event) => {
  event.waitUntil((async () => {
    for (const key of await caches.keys()) {
      if (key.startsWith(PREFIX) && key !== CACHE) await caches.delete(key);
    }
    await self.clients.claim();
  })());
});

function keptURL(request) {
  if (request.method !== 'GET') return null;
  const url = new URL(request.url);
  url.search = '';
  url.hash = '';
  if (url.href === SCOPE.href) url.pathname += 'index.html';
  return KEPT.has(url.href) ? url.href : null;
}

self.addEventListener('fetch', (event) => {
  const key = keptURL(event.request);
  if (!key) return;
  event.respondWith((async () => {
    const cache = await caches.open(CACHE);
    try {
      const fresh = await fetch(event.request);
      if (fresh.ok) await cache.put(key, fresh.clone());
      return fresh;
    } catch (err) {
      const kept = await cache.match(key);
      if (kept) return kept;
      throw err;
    }
  })());
});
