// A tiny static server for the demo: 127.0.0.1 only, no listing, no server logic.
//   node demo/serve.mjs [--root dist] [--port 8000]
// The demo and browser tests import serveStatic() to mount folders, add virtual files and
// count requests. Single `Range: bytes=a-b` requests get a 206, so cut downloads resume.
import { createServer } from 'node:http';
import { createReadStream, statSync } from 'node:fs';
import { Readable } from 'node:stream';
import { dirname, extname, join, normalize, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const TYPES = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.mjs': 'text/javascript',
  '.css': 'text/css', '.json': 'application/json', '.wasm': 'application/wasm',
  '.zip': 'application/zip', '.whl': 'application/zip', '.png': 'image/png',
  '.jpg': 'image/jpeg', '.svg': 'image/svg+xml', '.txt': 'text/plain',
  '.pte': 'application/octet-stream', '.bin': 'application/octet-stream',
};

/**
 * Serve folders on 127.0.0.1: `mounts` ({"/prefix/": "/abs/dir"}), then `root` for every
 * other path, and `files` ({"/url/path": Buffer | "/abs/file"}), which win over both.
 * A path under no folder is a 404; one that climbs out of its folder a 403. Resolves to
 * {url, hits, ranges, close}; `hits` counts requests by path, `ranges` lists `path range` of
 * each Range request. Tests only: `cut` ({"/url/path": fraction}) ends the first full
 * response of a path after that fraction of its bytes by closing the connection.
 * @param {{root?: string, mounts?: Record<string, string>, port?: number,
 *   files?: Record<string, Buffer | string>, cache?: string, cut?: Record<string, number>}} options
 */
export function serveStatic({ root = null, mounts = {}, port = 0, files = {}, cache = 'no-cache', cut = {} }) {
  const folders = Object.entries(mounts).map(([prefix, dir]) => [prefix, resolve(dir)]);
  if (root != null) folders.push(['/', resolve(root)]);
  const hits = new Map();
  const ranges = [];
  const toCut = new Map(Object.entries(cut));
  const server = createServer((req, res) => {
    let path;
    try {
      path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    } catch {
      return void res.writeHead(400).end();
    }
    hits.set(path, (hits.get(path) ?? 0) + 1);
    if (path.endsWith('/')) path += 'index.html';
    const send = (name, size, source) => {
      const h = { 'content-type': TYPES[extname(name)] ?? 'application/octet-stream', 'cache-control': cache, 'accept-ranges': 'bytes' };
      let [start, end, status] = [0, size - 1, 200];
      const range = req.headers.range;
      if (range) {
        ranges.push(`${path} ${range}`);
        const m = /^bytes=(\d*)-(\d*)$/.exec(range);
        if (m && (m[1] || m[2])) {
          [start, end] = m[1] ? [Number(m[1]), m[2] ? Math.min(Number(m[2]), size - 1) : size - 1] : [Math.max(0, size - Number(m[2])), size - 1];
          if (start > end) return void res.writeHead(416, { 'content-range': `bytes */${size}` }).end();
          status = 206;
          h['content-range'] = `bytes ${start}-${end}/${size}`;
        }
      }
      res.writeHead(status, { ...h, 'content-length': end - start + 1 });
      if (req.method === 'HEAD') return void res.end();
      const fraction = status === 200 ? toCut.get(path) : undefined;
      if (fraction !== undefined) toCut.delete(path);
      const stop = fraction === undefined ? end + 1 : Math.floor(size * fraction);
      const body = Buffer.isBuffer(source) || stop <= start
        ? Readable.from([Buffer.from(source.subarray?.(start, stop) ?? [])]) : createReadStream(source, { start, end: stop - 1 });
      if (fraction === undefined) return void body.pipe(res);
      body.pipe(res, { end: false });
      // The client sees a body shorter than its Content-Length. The close waits a moment so a
      // busy browser has read what was sent (on an error it drops bytes it had not handed on).
      body.on('end', () => setTimeout(() => res.socket.end(), 250));
    };
    const virtual = files[path];
    if (Buffer.isBuffer(virtual)) return send(path, virtual.length, virtual);
    let file = virtual;
    if (file === undefined) {
      const folder = folders.find(([prefix]) => path.startsWith(prefix));
      if (!folder) return void res.writeHead(404).end();
      const [prefix, dir] = folder;
      file = normalize(join(dir, path.slice(prefix.length)));
      if (!file.startsWith(dir + sep)) return void res.writeHead(403).end();
    }
    let st;
    try {
      st = statSync(file);
    } catch {
      return void res.writeHead(404).end();
    }
    if (!st.isFile()) return void res.writeHead(404).end();
    send(file, st.size, file);
  });
  return new Promise((ok, fail) => {
    server.once('error', fail);
    server.listen(port, '127.0.0.1', () => {
      const url = `http://127.0.0.1:${server.address().port}`;
      ok({ url, hits, ranges, close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(r); }) });
    });
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { root: { type: 'string' }, port: { type: 'string' } } });
  const root = values.root ?? join(dirname(fileURLToPath(import.meta.url)), '..', 'dist');
  const first = Number(values.port ?? 8000);
  let site;
  for (let port = first; !site; port++) {
    try {
      site = await serveStatic({ root, port });
    } catch (err) {
      if (err.code !== 'EADDRINUSE' || port >= first + 20) throw err;
    }
  }
  const { url } = site;
  console.log(`\n  webpte demo: ${url}/\n  (serving ${resolve(root)}; Ctrl-C stops)\n`);
}
