// What a Vite app needs for webpte: keep it out of dependency pre-bundling, so the worker and
// the files it loads stay next to the package's modules in `vite` (dev). `vite build` needs nothing.
export default {
  optimizeDeps: { exclude: ['webpte'] },
};
