// What a Vite app needs for webpte: keep it out of dependency pre-bundling, so that in `vite`
// (dev) the worker and the files it loads stay next to the package's modules. `vite build`
// needs nothing: it emits every file the package names with `new URL(..., import.meta.url)`.
export default {
  optimizeDeps: { exclude: ['webpte'] },
};
