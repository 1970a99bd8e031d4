// What an esbuild app needs for webpte: an ES module bundle (`format: 'esm'`, loaded with
// <script type="module">) and a copy of the package's dist/ beside it. esbuild leaves
// `new URL('./worker.js', import.meta.url)` as it is, so the browser resolves the worker (and
// the worker every file it loads) against the bundle's own URL; the copy puts them there.
// The same as: esbuild main.js --bundle --format=esm --minify --outdir=out && cp -r node_modules/webpte/dist/. out/
import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';

/** Bundle `root`/main.js into `outdir` and copy webpte's files beside it. */
export async function buildApp({ root = '.', outdir = join(root, 'out'), minify = true } = {}) {
  await build({ absWorkingDir: root, entryPoints: ['main.js'], bundle: true, format: 'esm', minify, outdir, logLevel: 'warning' });
  cpSync(join(root, 'node_modules/webpte/dist'), outdir, { recursive: true });
}
