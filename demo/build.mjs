// Lay the demo out as a static site on top of the webpte build (`npm run build`'s dist/):
//   OUT/index.html           the page
//   OUT/demo/*.js, *.css     its modules and style (they import ../index.js, the library)
//   OUT/sw.js                service worker listing every file of the site but model files
//   OUT/models/smollm2/      the bundled model folder (--model DIR), hard-linked or copied
// OUT is dist/ itself by default; with --out elsewhere the library files are copied there
// first (the tests build a private copy that a concurrent `npm run build` cannot pull away).
//
//   node demo/build.mjs [--model DIR] [--lib dist] [--out DIR]
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, linkSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const HERE = dirname(fileURLToPath(import.meta.url));
const SITE = /\.(js|css|html)$/; // the page's files; tools are .mjs, sw.js goes to the root
const MODEL_MOUNT = 'models/smollm2';
const OWN = ['demo', 'models', 'index.html', 'sw.js']; // what this build adds to the library

const { values: args } = parseArgs({
  options: { model: { type: 'string' }, lib: { type: 'string' }, out: { type: 'string' } },
});
const lib = resolve(args.lib ?? join(HERE, '..', 'dist'));
const dist = resolve(args.out ?? lib);
if (!existsSync(join(lib, 'index.js')) || !existsSync(join(lib, 'worker.js'))) {
  console.error(`demo build: ${lib} has no webpte build (index.js, worker.js); run \`npm run build\` first`);
  process.exit(1);
}

function files(dir) {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath ?? e.path, e.name));
}

/** Hard link when dist/ and the source share a file system (no 170 MB copy), else copy. */
function place(src, dst) {
  mkdirSync(dirname(dst), { recursive: true });
  try {
    linkSync(src, dst);
  } catch {
    copyFileSync(src, dst);
  }
}

if (dist !== lib) {
  rmSync(dist, { recursive: true, force: true });
  for (const f of files(lib)) {
    const rel = relative(lib, f);
    if (!OWN.includes(rel.split(sep)[0])) place(f, join(dist, rel));
  }
}
for (const stale of OWN) rmSync(join(dist, stale), { recursive: true, force: true });
mkdirSync(join(dist, 'demo'), { recursive: true });

for (const name of readdirSync(HERE).filter((n) => SITE.test(n) && n !== 'sw.js')) {
  copyFileSync(join(HERE, name), name === 'index.html' ? join(dist, name) : join(dist, 'demo', name));
}

let modelNote = 'no bundled model (--model DIR adds one)';
if (args.model) {
  const src = resolve(args.model);
  if (!existsSync(join(src, 'webpte_model.json'))) {
    console.error(`demo build: ${src} is not a webpte model folder (no webpte_model.json)`);
    process.exit(1);
  }
  let bytes = 0;
  for (const f of files(src)) {
    place(f, join(dist, MODEL_MOUNT, relative(src, f)));
    bytes += statSync(f).size;
  }
  modelNote = `${MODEL_MOUNT}/ from ${src} (${(bytes / 1e6).toFixed(0)} MB)`;
}

// Everything but the model files goes into the service worker's list, its digest names the
// cache. A model's meta file is in it: the page reads it to offer the model, and loadModel
// finds the rest of the model in its own Cache Storage once it has been loaded.
const site = files(dist)
  .map((f) => relative(dist, f).split(sep).join('/'))
  .filter((p) => (!p.startsWith('models/') || p.endsWith('/webpte_model.json')) && p !== 'sw.js')
  .sort();
const digest = createHash('sha256');
for (const p of site) digest.update(p).update('\0').update(readFileSync(join(dist, p)));
const version = digest.digest('hex').slice(0, 16);
const sw = readFileSync(join(HERE, 'sw.js'), 'utf8')
  .replace(/^const VERSION = .*$/m, `const VERSION = '${version}';`)
  .replace(/^const FILES = .*$/m, `const FILES = ${JSON.stringify(site)};`);
if (!sw.includes(version)) throw new Error('demo/sw.js lost its VERSION line');
writeFileSync(join(dist, 'sw.js'), sw);

console.log(`demo built into ${dist}: index.html, demo/, sw.js (${site.length} files kept offline, version ${version}); ${modelNote}`);
