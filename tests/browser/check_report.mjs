// Opens a report.html in Debian's headless Chromium and prints, as JSON, what a person would get:
// console errors, page errors, every network request other than the file itself (each one is
// recorded and aborted, so nothing leaves the machine), the plots with the number of data marks
// each one draws, the section headings, and a full-page screenshot.
//
// usage: node check_report.mjs REPORT_HTML SCREENSHOT_PNG
// The browser is never downloaded (playwright-core has none): CHROMIUM overrides /usr/bin/chromium.
import { chromium } from 'playwright-core';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const [report, screenshot] = process.argv.slice(2);
if (!report || !screenshot) {
  console.error('usage: node check_report.mjs REPORT_HTML SCREENSHOT_PNG');
  process.exit(2);
}
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
if (!existsSync(executablePath)) {
  console.error(`no Chromium at ${executablePath}: install it with 'apt-get install -y chromium'`);
  process.exit(3);
}
const url = pathToFileURL(resolve(report)).href;

const browser = await chromium.launch({
  executablePath,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const result = { url, consoleErrors: [], pageErrors: [], requests: [] };
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('console', (msg) => { if (msg.type() === 'error') result.consoleErrors.push(msg.text()); });
  page.on('pageerror', (err) => result.pageErrors.push(String(err)));
  await page.route('**/*', (route) => {
    const asked = route.request().url();
    if (asked === url) return route.continue();
    result.requests.push(asked);
    return route.abort();
  });
  await page.goto(url, { waitUntil: 'load' });
  result.title = await page.title();
  result.headings = await page.$$eval('h2', (hs) => hs.map((h) => h.textContent.trim()));
  result.plots = await page.$$eval('figure.plot', (figures) => figures.map((figure) => {
    const svg = figure.querySelector('svg');
    const groups = svg ? Array.from(svg.querySelectorAll('g[id^="data-"]')) : [];
    let marks = 0;
    for (const g of groups) {
      // A data mark is a drawn path with coordinates (not a marker definition) or a placed marker.
      marks += Array.from(g.querySelectorAll('path')).filter((p) => !p.closest('defs') && /\d/.test(p.getAttribute('d') || '')).length;
      marks += Array.from(g.querySelectorAll('use')).filter((u) => u.hasAttribute('x') && u.hasAttribute('y')).length;
    }
    const box = svg ? svg.getBoundingClientRect() : { width: 0, height: 0 };
    return {
      id: figure.id,
      title: (figure.querySelector('h3') || {}).textContent || '',
      caption: (figure.querySelector('figcaption') || {}).textContent || '',
      dataGroups: groups.length,
      marks,
      width: Math.round(box.width),
      height: Math.round(box.height),
    };
  }));
  await page.screenshot({ path: screenshot, fullPage: true });
  result.screenshot = resolve(screenshot);
} finally {
  await browser.close();
}
console.log(JSON.stringify(result, null, 2));
