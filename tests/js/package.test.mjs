// The npm package as published: version in step with the Python package, every module and
// asset in `files`, the exports map, and the worker's asset lookup (bundlers may rename files).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundledLock, indexURL } from '../../web/runtime.js';
import { wheelURLs } from '../../web/assets.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));

test('the package is publishable, with the Python package version', () => {
  assert.ok(!pkg.private, 'package.json is private');
  const py = /^version = "(.*)"/m.exec(readFileSync(join(ROOT, 'pyproject.toml'), 'utf8'))[1];
  assert.equal(pkg.version, py);
  assert.ok(Object.keys(wheelURLs()).includes(`webpte-${py}-py3-none-any.whl`), 'web/assets.js names another webpte wheel');
  assert.deepEqual(pkg.dependencies ?? {}, {}, 'the page needs no runtime dependency: Pyodide and tokenizers are bundled');
});

test('files lists every module of web/ and the bundled assets; exports have types', () => {
  for (const name of readdirSync(join(ROOT, 'web')).filter((n) => n.endsWith('.js'))) {
    assert.ok(pkg.files.includes(`dist/${name}`), `package.json files lacks dist/${name}`);
  }
  for (const dir of ['dist/pyodide/', 'dist/wheels/', 'dist/vendor/', 'types/']) assert.ok(pkg.files.includes(dir), dir);
  assert.equal(pkg.exports['.'].default, './dist/index.js');
  assert.equal(pkg.exports['.'].types, pkg.types);
  assert.equal(Object.keys(pkg.exports['.'])[0], 'types', 'types must come first in a conditional export');
});

test('the wasm binary is found under its own name or a bundler-given one', () => {
  assert.equal(indexURL('http://h/app/node_modules/webpte/dist/pyodide/pyodide.asm.wasm'), 'http://h/app/node_modules/webpte/dist/pyodide/');
  const hashed = indexURL('http://h/assets/pyodide.asm-DoBEEsqh.wasm');
  assert.equal(`${hashed}/pyodide.asm.wasm`.split('?')[0], 'http://h/assets/pyodide.asm-DoBEEsqh.wasm');
  assert.ok(indexURL('http://h/a.wasm?v=1').startsWith('http://h/a.wasm?v=1&'));
});

test('the lock file points at the URLs the bundler gave the wheels', () => {
  const urls = wheelURLs();
  const name = Object.keys(urls)[0];
  const lock = bundledLock({ info: { arch: 'wasm32' }, packages: { x: { file_name: name, sha256: 'ab' } } });
  assert.deepEqual(lock, { info: { arch: 'wasm32' }, packages: { x: { file_name: urls[name], sha256: 'ab' } } });
  assert.throws(() => bundledLock({ packages: { y: { file_name: 'other-1.0-py3-none-any.whl' } } }), /does not list/);
});
