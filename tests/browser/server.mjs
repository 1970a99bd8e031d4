// A tiny static server for the browser suite: 127.0.0.1 only, fixed mounts, no listing.
import { createServer } from 'node:http';
import { createReadStream, statSync } from 'node:fs';
import { extname, join, normalize, resolve, sep } from 'node:path';

const TYPES = {
  '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript',
  '.json': 'application/json', '.wasm': 'application/wasm', '.zip': 'application/zip',
  '.whl': 'application/zip', '.pte': 'application/octet-stream', '.bin': 'application/octet-stream',
};

/**
 * Serve `mounts` ({"/prefix/": "/abs/dir"}) on 127.0.0.1; resolves to {url, close, hits}.
 * `hits` counts requests by path, so tests can see what a page fetched.
 */
export function serveStatic(mounts) {
  const hits = new Map();
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    hits.set(path, (hits.get(path) ?? 0) + 1);
    const prefix = Object.keys(mounts).find((p) => path.startsWith(p));
    if (!prefix) return void res.writeHead(404).end();
    const root = resolve(mounts[prefix]);
    const file = normalize(join(root, path.slice(prefix.length)));
    if (file !== root && !file.startsWith(root + sep)) return void res.writeHead(403).end();
    let st;
    try {
      st = statSync(file);
    } catch {
      return void res.writeHead(404).end();
    }
    if (!st.isFile()) return void res.writeHead(404).end();
    res.writeHead(200, {
      'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
      'content-length': st.size, 'cache-control': 'no-store',
    });
    createReadStream(file).pipe(res);
  });
  return new Promise((ok) => server.listen(0, '127.0.0.1', () => {
    const { port } = server.address();
    ok({ url: `http://127.0.0.1:${port}`, hits, close: () => new Promise((r) => server.close(r)) });
  }));
}
