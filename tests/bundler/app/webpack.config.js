// What a webpack 5 app needs for webpte: ES module output. webpack gives
// `new Worker(new URL('./worker.js', import.meta.url), { type: 'module' })` a module worker only
// when its output is ES modules (otherwise it drops `type` and Pyodide refuses the classic
// worker). The rest are webpack's defaults: it bundles the worker and emits every file named by
// `new URL('./…', import.meta.url)` (Pyodide core, wheels, lock file, tokenizers) as an asset.
// The page loads the bundle with <script type="module" src="main.mjs">.
export default {
  entry: './main.js',
  output: { module: true },
};
