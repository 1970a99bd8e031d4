// Headless Chromium for the browser suites: WebGPU (SwiftShader), pages from a 127.0.0.1
// server, every other request blocked and recorded in `blocked`.
//
// Env: WEBPTE_CHROMIUM (default /usr/bin/chromium), WEBPTE_WEB_VERBOSE=1 echoes the page's console.
import { chromium } from 'playwright-core';
import { serveStatic } from './server.mjs';

export const CHROMIUM = process.env.WEBPTE_CHROMIUM ?? '/usr/bin/chromium';

/**
 * Start the server for `mounts` and a browser page on `${url}/suite/page.html` (the suite's
 * harness must be mounted at /suite/); `serverOptions` go to the server. Resolves to
 * {server, browser, page, blocked, close}.
 */
export async function openSuitePage(mounts, serverOptions = {}) {
  const server = await serveStatic(mounts, serverOptions);
  const blocked = [];
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--enable-unsafe-webgpu', '--no-sandbox', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic',
      '--disable-dev-shm-usage'],
  });
  const context = await browser.newContext();
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith(`${server.url}/`)) return route.continue();
    blocked.push(url);
    return route.abort('blockedbyclient');
  });
  const page = await context.newPage();
  page.on('console', (m) => {
    if (process.env.WEBPTE_WEB_VERBOSE === '1' || m.type() === 'error') console.error(`[page ${m.type()}] ${m.text()}`);
  });
  await page.goto(`${server.url}/suite/page.html`);
  await page.waitForFunction(() => window.suiteReady === true, null, { timeout: 60_000 });
  return {
    server, browser, page, blocked,
    close: async () => { await browser.close(); await server.close(); },
  };
}
