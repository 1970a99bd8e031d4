// The app imports the package by name, as a web developer would; the test drives it through
// window.webpte (page.evaluate).
import * as webpte from 'webpte';

window.webpte = webpte;
window.appReady = true;
