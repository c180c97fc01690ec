// Drives a running campaign's Locust web UI in Debian's headless Chromium as a person would, and
// prints as JSON what it saw: the banner, the live tab's cells while a stage runs next to the
// /stats/requests reply they were drawn from, what Stop did, and what a second Start answered.
//
// usage: node check_webui.mjs BASE_URL SCREENSHOT_DIR
// Steps: open the page, press Start, open the "GPU sharing, live" tab, wait until every class has
// requests in the live window during stage 1, read the table, take a screenshot; open the live charts
// and wait until their last point is the window the table showed last, read each chart's lines; press
// Stop, wait for the campaign tab to say "interrupted", then press Start again and record the /swarm answer.
import { chromium } from 'playwright-core';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

const [base, shots] = process.argv.slice(2);
if (!base || !shots) {
  console.error('usage: node check_webui.mjs BASE_URL SCREENSHOT_DIR');
  process.exit(2);
}
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
if (!existsSync(executablePath)) {
  console.error(`no Chromium at ${executablePath}: install it with 'apt-get install -y chromium'`);
  process.exit(3);
}
const deadline = (seconds) => Date.now() + seconds * 1000;
const browser = await chromium.launch({
  executablePath,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
});
const result = { consoleErrors: [], pageErrors: [], replies: 0 };
let lastStats = null;
const tablesByWindowEnd = new Map();  // the live window's end -> the live table's rows and window row shown for it
let swarmReplies = [];
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.on('console', (msg) => { if (msg.type() === 'error') result.consoleErrors.push(msg.text()); });
  page.on('pageerror', (err) => result.pageErrors.push(String(err)));
  page.on('response', async (response) => {
    const url = response.url();
    try {
      if (url.endsWith('/stats/requests')) {
        lastStats = await response.json();
        result.replies += 1;
        const window = rowsOf(lastStats, 'bench-campaign').find((r) => String(r.item).startsWith('live window'));
        if (window) tablesByWindowEnd.set(window.end, { window, live: rowsOf(lastStats, 'bench-live') });
      }
      if (url.endsWith('/swarm')) swarmReplies.push(await response.json());
    } catch (err) { /* a reply cut short by navigation: the next poll brings another */ }
  });
  await page.goto(base, { waitUntil: 'load' });
  result.banner = (await page.textContent('#bench-plugin-banner')) || '';
  await page.waitForSelector('form input[name=host]', { timeout: 15000 }).catch(() => null);
  result.formFields = await page.$$eval('form input', (inputs) => inputs.map((i) => ({
    name: i.name, disabled: i.disabled, readOnly: i.readOnly, value: i.value })));
  await page.click('form button[type=submit]');
  result.firstStart = await waitFor(() => swarmReplies[0], 15);
  await page.getByRole('tab', { name: 'GPU sharing, live' }).click();

  // Wait for stage 1 with requests of every class in the window, then read the table and the reply
  // it was drawn from (re-read until both agree: a poll may land between the two reads).
  const until = deadline(120);
  while (Date.now() < until) {
    const table = await readTable(page);
    const stats = lastStats;
    const campaign = rowsOf(stats, 'bench-campaign');
    const stage = (campaign.find((r) => r.item === 'stage') || {}).value || '';
    const live = rowsOf(stats, 'bench-live');
    const allBusy = live.length > 0 && live.every((r) => Number(r.requests) >= 10 && Number(r.stagerequests) >= 5);
    if (stage.startsWith('high') && allBusy && sameCells(table, live)) {
      const entries = (stats.stats || []).map((e) => ({ name: e.name, method: e.method, requests: e.num_requests }));
      result.live = { table, reply: live, campaign, entries };
      break;
    }
    await page.waitForTimeout(250);
  }
  await page.screenshot({ path: join(shots, 'webui-live.png'), fullPage: true });

  // The live charts: their last point must be a window the live table showed (the same window end).
  await page.click('#bench-plugin-charts summary');
  const frame = page.frameLocator('#bench-plugin-charts iframe');
  const chartsUntil = deadline(30);
  while (Date.now() < chartsUntil) {
    const lines = await frame.locator('path.line').evaluateAll((paths) => paths.map((p) => ({
      name: p.dataset.name, last: Number(p.dataset.last), t: Number(p.dataset.lastT) })));
    const p95 = lines.filter((l) => /^(llm|embedding|asr) P95$/.test(l.name));
    const shown = p95.length === 3 && p95.every((l) => l.t === p95[0].t) && tablesByWindowEnd.get(p95[0].t);
    if (shown) {
      const series = await page.request.get(new URL('bench/series.json', base.endsWith('/') ? base : base + '/').href);
      result.charts = { ...shown, lines, marks: await frame.locator('line.mark').count(), series: await series.json() };
      break;
    }
    await page.waitForTimeout(200);
  }
  await page.screenshot({ path: join(shots, 'webui-charts.png'), fullPage: true });

  await page.getByRole('button', { name: 'Stop' }).click();
  await page.getByRole('tab', { name: 'GPU sharing, campaign' }).click();
  // The banner's campaign line: Locust's own tables stop polling once its test has stopped, the banner does not.
  result.afterStop = await waitFor(async () => {
    const status = (await page.textContent('#bench-plugin-status')) || '';
    return status && status !== 'running' && status !== 'waiting' ? status : null;
  }, 120);
  await page.waitForTimeout(2500);  // one more poll, so the table shows the end
  await page.screenshot({ path: join(shots, 'webui-campaign.png'), fullPage: true });
  result.campaignTable = await readTable(page);
  const report = await page.request.get(new URL('bench/report', base.endsWith('/') ? base : base + '/').href);
  result.report = { status: report.status(), type: report.headers()['content-type'] };

  // A second Start: the UI offers a new test; the campaign must say it has ended, not start again.
  swarmReplies = [];
  // Locust's UI learns that its test stopped from its own polling, which a busy host delays: wait until it
  // offers a new test (its "New" button) or its form, whichever it shows, rather than looking once.
  // Locust's UI polls its stats only while its state is spawning or running: a master is "stopping" from the Stop
  // until its workers report stopped, and a poll landing then leaves the page at STOPPING for good (a user
  // reloads it). Where the runner itself has stopped by then, the page is reloaded once, as a user would, and
  // that is recorded; a runner still stopping is a hang, and fails.
  const again = page.getByRole('button', { name: /new/i }).first();
  const submit = page.locator('form button[type=submit]').first();
  const runnerState = () => page.request.get(new URL('stats/requests', base.endsWith('/') ? base : base + '/').href)
    .then((r) => r.json()).catch((e) => ({ state: `unreadable: ${e}` }));
  try {
    await again.or(submit).first().waitFor({ timeout: 30000 });
  } catch (err) {
    const stats = await runnerState();
    const shown = await page.innerText('body').catch(() => '');
    if (stats.state === 'stopping' || !/\bSTOPPING\b/i.test(shown)) {
      throw new Error(`${err.message}; the runner's state then: ${stats.state}, workers: ${JSON.stringify(stats.workers)}`);
    }
    result.reloadedAfterStop = stats.state;
    await page.reload();
    await again.or(submit).first().waitFor({ timeout: 30000 });
  }
  if (await again.isVisible()) await again.click();
  await submit.click({ timeout: 60000 });
  result.secondStart = await waitFor(() => swarmReplies[0], 15);
  await page.waitForTimeout(1000);
  result.afterSecondStart = await page.innerText('body');
  await page.screenshot({ path: join(shots, 'webui-second-start.png'), fullPage: true });
} catch (err) {
  result.error = String(err && err.stack ? err.stack : err);
} finally {
  await browser.close();
}
console.log(JSON.stringify(result));

function rowsOf(stats, key) {
  const tab = stats && (stats.extended_stats || []).find((t) => t.key === key);
  return tab ? tab.data : [];
}

async function readTable(page) {
  return page.$$eval('table', (tables) => {
    const table = tables[tables.length - 1];
    if (!table) return null;
    const heads = Array.from(table.querySelectorAll('thead th')).map((th) => th.textContent.trim());
    const rows = Array.from(table.querySelectorAll('tbody tr')).map((tr) =>
      Array.from(tr.querySelectorAll('td')).map((td) => td.textContent.trim()));
    return { heads, rows };
  });
}

function sameCells(table, live) {
  if (!table || table.rows.length !== live.length) return false;
  return live.every((row) => table.rows.some((cells) => cells[0] === row.cls && cells.includes(row.p95)
    && cells.includes(row.p50)));
}

async function waitFor(probe, seconds) {
  const until = deadline(seconds);
  while (Date.now() < until) {
    const value = await probe();
    if (value) return value;
    await new Promise((r) => setTimeout(r, 200));
  }
  return null;
}
