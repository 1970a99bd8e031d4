// The browser suite's static server: the demo's (demo/serve.mjs) with fixed mounts and no
// caching, so a test sees every fetch the page makes.
import { serveStatic as serve } from '../../demo/serve.mjs';

/**
 * Serve `mounts` ({"/prefix/": "/abs/dir"}) on 127.0.0.1; resolves to {url, close, hits}.
 * `hits` counts requests by path, so tests can see what a page fetched; `options` go to
 * demo/serve.mjs (e.g. `cut`).
 */
export function serveStatic(mounts, options = {}) {
  return serve({ mounts, cache: 'no-store', ...options });
}
