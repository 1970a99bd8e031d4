// Every file the worker loads besides its own modules, each named by a literal
// `new URL('./…', import.meta.url)`: bundlers (Vite, webpack; tests/browser/bundler*.test.mjs)
// see these and emit the files, possibly under hashed names, so nothing here may be derived
// from another file's URL. esbuild leaves them as they are: there they resolve against the
// bundle's URL, beside which the app copies the package's dist/. scripts/build_web.sh checks that the wheel
// names below are exactly the wheels it put in dist/wheels/.

/** The Pyodide core: its loader module, the Emscripten module, the wasm binary, the stdlib. */
export const pyodideFiles = () => ({
  loader: new URL('./pyodide/pyodide.mjs', import.meta.url).href,
  module: new URL('./pyodide/pyodide.asm.mjs', import.meta.url).href,
  wasm: new URL('./pyodide/pyodide.asm.wasm', import.meta.url).href,
  stdlib: new URL('./pyodide/python_stdlib.zip', import.meta.url).href,
});

/** The lock file of the bundled wheels (made by `pyodide lockfile add-wheels`). */
export const lockFileURL = () => new URL('./wheels/pyodide-lock.json', import.meta.url).href;

/** The bundled wheels by file name (the lock file's `file_name`). */
export const wheelURLs = () => ({
  'webpte-0.1.0-py3-none-any.whl': new URL('./wheels/webpte-0.1.0-py3-none-any.whl', import.meta.url).href,
  'jinja2-3.1.6-py3-none-any.whl': new URL('./wheels/jinja2-3.1.6-py3-none-any.whl', import.meta.url).href,
  'markupsafe-3.0.3-py3-none-any.whl': new URL('./wheels/markupsafe-3.0.3-py3-none-any.whl', import.meta.url).href,
  'flatbuffers-25.12.19-py2.py3-none-any.whl': new URL('./wheels/flatbuffers-25.12.19-py2.py3-none-any.whl', import.meta.url).href,
});

/** @huggingface/tokenizers, one dependency-free ES module. */
export const tokenizersURL = () => new URL('./vendor/tokenizers.mjs', import.meta.url).href;
