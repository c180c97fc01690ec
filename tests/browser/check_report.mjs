// Opens a report.html in Debian's headless Chromium and prints, as JSON, what a person would get:
// console errors, page errors, every network request other than the file itself (each one is
// recorded and aborted, so nothing leaves the machine), the plots with the number of data marks
// each one draws, the section headings, every percentile cell's text (each P95 must name its sample
// count), and a full-page screenshot; with SHOTS_DIR, also screenshots of the verdict section
// (verdict.png) and of one plot (plot-<id>.png, the first latency plot).
//
// usage: node check_report.mjs REPORT_HTML SCREENSHOT_PNG [SHOTS_DIR]
// The browser is never downloaded (playwright-core has none): CHROMIUM overrides /usr/bin/chromium.
import { chromium } from 'playwright-core';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const [report, screenshot, shots] = process.argv.slice(2);
if (!report || !screenshot) {
  console.error('usage: node check_report.mjs REPORT_HTML SCREENSHOT_PNG [SHOTS_DIR]');
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
  // Every cell that holds a percentile: those the report marks (data-pct), and every table cell under a
  // heading that names a P95, marked or not, so an unmarked one is caught too.
  result.percentiles = await page.$$eval('[data-pct]', (cells) => cells.map((c) => ({
    pct: c.getAttribute('data-pct'), n: c.getAttribute('data-n'), text: c.textContent.trim(),
    low: c.classList.contains('low'), title: c.getAttribute('title') || '',
    style: getComputedStyle(c).fontStyle,
  })));
  result.p95Cells = await page.$$eval('table', (tables) => tables.flatMap((t) => {
    const heads = Array.from(t.querySelectorAll('thead th')).map((th) => th.textContent);
    const columns = heads.map((h, i) => (/P95/.test(h) ? i : -1)).filter((i) => i >= 0);
    return Array.from(t.querySelectorAll('tbody tr')).flatMap((tr) => {
      const tds = Array.from(tr.children);
      return columns.filter((i) => tds[i]).map((i) => ({ header: heads[i], text: tds[i].textContent.trim() }));
    });
  }));
  await page.screenshot({ path: screenshot, fullPage: true });
  result.screenshot = resolve(screenshot);
  if (shots) {
    result.shots = {};
    const verdict = join(shots, 'verdict.png');
    await page.locator('section#verdict').screenshot({ path: verdict });
    result.shots.verdict = resolve(verdict);
    const plot = page.locator('figure.plot[id^="latency-"]').first();
    const id = await plot.getAttribute('id');
    const path = join(shots, `plot-${id}.png`);
    await plot.screenshot({ path });
    result.shots.plot = resolve(path);
  }
} finally {
  await browser.close();
}
console.log(JSON.stringify(result, null, 2));
