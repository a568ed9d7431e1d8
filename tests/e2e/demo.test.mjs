// End-to-end test of the floodgate demo page, driven in Debian's Chromium via playwright-core.
//
//   FLOODGATE_URL=http://127.0.0.1:8080 SCREENSHOT=/tmp/demo.png node demo.test.mjs
//
// Needs a running `floodgate serve` (memory:// store is fine) and /usr/bin/chromium
// (`apt-get install -y chromium`); never downloads a browser. Exits 0 when every check
// passes, 1 on the first failure (with the reason), and gives up after 60 s overall.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const BASE = (process.env.FLOODGATE_URL || 'http://127.0.0.1:8080').replace(/\/+$/, '');
const SCREENSHOT = process.env.SCREENSHOT || path.join(os.tmpdir(), 'floodgate-demo.png');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
// The store the page must say is in use, by its scheme (memory://, redis://...).
const EXPECT_STORE = process.env.EXPECT_STORE || '';
const OVERALL_MS = 60_000;
const BURST_WAIT_MS = 10_000;

let passed = 0;
let browser = null;
let finished = false;

class Failure extends Error {}

function check(condition, what, detail = '') {
  if (!condition) throw new Failure(detail ? `${what}: ${detail}` : what);
  passed++;
  console.log(`ok ${passed} - ${what}`);
}

async function finish(code, message) {
  if (finished) return;
  finished = true;
  if (message) console.error(message);
  console.log(`e2e: ${passed} passed, ${code === 0 ? 0 : 1} failed`);
  try { if (browser) await Promise.race([browser.close(), new Promise((r) => setTimeout(r, 5000))]); } catch {}
  process.exit(code);
}

const overall = setTimeout(() => {
  finish(1, `FAIL: the e2e test did not finish within ${OVERALL_MS / 1000} s (server at ${BASE} hung?)`);
}, OVERALL_MS);

const testid = (page, id) => page.getByTestId(id);

async function text(page, id) {
  return ((await testid(page, id).textContent()) || '').trim();
}

async function counts(page) {
  return page.evaluate(() => ({
    allowed: Number(document.querySelector('[data-testid="allowed-count"]').textContent),
    denied: Number(document.querySelector('[data-testid="denied-count"]').textContent),
    errors: Number(document.querySelector('[data-testid="error-count"]').textContent),
    inflight: Number(document.querySelector('[data-testid="inflight"]').dataset.count),
  }));
}

// Polls the DOM (bounded) until `total` answers are shown and nothing is in flight.
async function waitForAnswers(page, total) {
  try {
    await page.waitForFunction((n) => {
      const num = (id) => Number(document.querySelector(`[data-testid="${id}"]`).textContent);
      const inflight = Number(document.querySelector('[data-testid="inflight"]').dataset.count);
      const done = num('allowed-count') + num('denied-count') + num('error-count');
      const burstIdle = !document.querySelector('[data-testid="send-burst"]').disabled;
      return (done >= n && inflight === 0 && burstIdle) || num('error-count') > 0;
    }, total, { timeout: BURST_WAIT_MS, polling: 50 });
  } catch (e) {
    const c = await counts(page);
    throw new Failure(`only ${c.allowed + c.denied + c.errors} of ${total} results shown after ` +
      `${BURST_WAIT_MS / 1000} s (allowed ${c.allowed}, denied ${c.denied}, errors ${c.errors}, in flight ${c.inflight})`);
  }
  const c = await counts(page);
  if (c.errors > 0) {
    const err = await text(page, 'error');
    throw new Failure(`the page shows an error instead of decisions: ${err}`);
  }
  return c;
}

async function setPolicy(page, { algorithm, limit, period, unit }) {
  await testid(page, 'algorithm').selectOption(algorithm);
  await testid(page, 'limit').fill(String(limit));
  await testid(page, 'period').fill(String(period));
  await testid(page, 'period-unit').selectOption(unit);
  await testid(page, 'cost').fill('1');
}

async function logRows(page) {
  return page.evaluate(() => Array.from(document.querySelectorAll('[data-testid="log"] tbody tr[data-result]'))
    .map((tr) => ({ result: tr.dataset.result, cells: Array.from(tr.cells).map((td) => td.textContent.trim()) })));
}

async function main() {
  try {
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  } catch (e) {
    throw new Failure(`cannot launch Chromium at ${CHROMIUM} (apt-get install -y chromium): ${e.message.split('\n')[0]}`);
  }
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);

  const pageErrors = [];
  const foreign = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('console', (m) => {
    // Chromium logs every non-2xx fetch ("Failed to load resource"); the 400 check below causes one on purpose.
    if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) pageErrors.push(`console: ${m.text()}`);
  });
  page.on('request', (req) => {
    const u = new URL(req.url());
    if (u.protocol === 'data:') return;
    const ok = u.origin === new URL(BASE).origin && (u.pathname === '/' || u.pathname === '/v1/check');
    if (!ok) foreign.push(`${req.method()} ${req.url()}`);
  });

  // 1. The page loads and shows the store and version the server filled in.
  let response;
  try {
    response = await page.goto(`${BASE}/`, { waitUntil: 'load', timeout: 10_000 });
  } catch (e) {
    throw new Failure(`cannot load ${BASE}/ (is floodgate serve running?): ${e.message.split('\n')[0]}`);
  }
  check(response && response.status() === 200, 'GET / answers 200', `got ${response && response.status()}`);
  const store = await text(page, 'store');
  check(store.length > 0 && !store.includes('__FLOODGATE') && /^[a-z-]+:\/\//.test(store) &&
    store.startsWith(EXPECT_STORE), `the store in use is shown (${EXPECT_STORE || 'any'})`,
    JSON.stringify(store));
  const version = await text(page, 'version');
  check(version.length > 0 && !version.includes('__FLOODGATE'), 'the version is shown', JSON.stringify(version));
  console.log(`#   store ${store}, version ${version}`);

  // 2. fixed_window, 5 per minute, a burst of 20 on a fresh key: exactly 5 allowed.
  await setPolicy(page, { algorithm: 'fixed_window', limit: 5, period: 1, unit: 'm' });
  check(await testid(page, 'burst').isHidden(), 'burst is hidden for fixed_window');
  check(await text(page, 'policy') === 'fixed_window:5/1m', 'the policy string updates live',
    JSON.stringify(await text(page, 'policy')));
  await testid(page, 'new-key').click();
  const key1 = await text(page, 'key');
  check(/^demo:\S+$/.test(key1), 'a demo key is shown', JSON.stringify(key1));
  await testid(page, 'burst-size').fill('20');
  await testid(page, 'send-burst').click();
  let c = await waitForAnswers(page, 20);
  check(c.allowed === 5 && c.denied === 15, 'fixed_window:5/1m burst of 20: 5 allowed, 15 denied',
    `allowed ${c.allowed}, denied ${c.denied}`);

  let rows = await logRows(page);
  const denied = rows.filter((r) => r.result === 'denied');
  check(rows.length === 20 && denied.length === 15 && rows.filter((r) => r.result === 'allowed').length === 5,
    'the log lists the 20 results (15 denied)', `${rows.length} rows, ${denied.length} denied`);
  check(denied.every((r) => /^\d+(\.\d+)?\s*(µs|ms|s|min)\b/.test(r.cells[4] || '')),
    'denied log rows show a retry-after time', JSON.stringify(denied[0]));
  const headers = await text(page, 'last-headers');
  check(/^Retry-After:\s*\d+\s*$/im.test(headers), 'the last answer shows a Retry-After header', headers);
  check(/^X-RateLimit-Remaining:\s*0\s*$/im.test(headers) && /^X-RateLimit-Limit:\s*5\s*$/im.test(headers),
    'the last answer shows the X-RateLimit headers', headers);
  const body = JSON.parse(await text(page, 'last-body'));
  check(body.allowed === false && body.limit === 5 && body.remaining === 0 && body.retry_after_us > 0,
    'the last answer shows the Decision JSON', JSON.stringify(body));
  check((await testid(page, 'last-result').getAttribute('data-state')) === 'denied', 'the last answer reads denied');

  // The chart plotted the answers: green and red pixels on the canvas.
  const pixels = await page.evaluate(() => {
    const cv = document.querySelector('[data-testid="chart"]');
    const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
    let green = 0, red = 0;
    for (let i = 0; i < d.length; i += 4) {
      const [r, g, b, a] = [d[i], d[i + 1], d[i + 2], d[i + 3]];
      if (a < 200) continue;
      if (g > 100 && g > r * 1.6 && g > b * 1.4) green++;
      if (r > 150 && r > g * 2.5 && r > b * 2.5) red++;
    }
    return { green, red };
  });
  check(pixels.green > 20 && pixels.red > 20, 'the chart plots allowed (green) and denied (red) answers',
    JSON.stringify(pixels));

  // 3. sliding_log, 3 per minute, on a new key: a burst of 6 gives 3 allowed, 3 denied.
  await setPolicy(page, { algorithm: 'sliding_log', limit: 3, period: 1, unit: 'm' });
  await testid(page, 'new-key').click();
  const key2 = await text(page, 'key');
  check(key2 !== key1 && /^demo:\S+$/.test(key2), 'New key switches to a fresh key', `${key1} -> ${key2}`);
  c = await counts(page);
  check(c.allowed === 0 && c.denied === 0, 'New key resets the counters', JSON.stringify(c));
  check(await text(page, 'policy') === 'sliding_log:3/1m', 'the policy string reads sliding_log:3/1m',
    JSON.stringify(await text(page, 'policy')));
  await testid(page, 'burst-size').fill('6');
  await testid(page, 'send-burst').click();
  c = await waitForAnswers(page, 6);
  check(c.allowed === 3 && c.denied === 3, 'sliding_log:3/1m burst of 6: 3 allowed, 3 denied',
    `allowed ${c.allowed}, denied ${c.denied}`);
  rows = await logRows(page);
  check(rows.length === 6 && rows.every((r) => r.cells.includes('sliding_log:3/1m')),
    'the log shows the policy each request used', JSON.stringify(rows[0]));

  await page.screenshot({ path: SCREENSHOT, fullPage: true });
  check(fs.existsSync(SCREENSHOT) && fs.statSync(SCREENSHOT).size > 0,
    `full-page screenshot saved to ${SCREENSHOT}`);

  // 4. A 400 answer is shown to the user with the server's message.
  await testid(page, 'limit').fill('0');
  check(await text(page, 'policy') === 'sliding_log:0/1m', 'the policy string follows an invalid limit');
  await testid(page, 'send-one').click();
  await page.waitForFunction(() => {
    const e = document.querySelector('[data-testid="error"]');
    return e && !e.hidden && e.textContent.trim().length > 0;
  }, null, { timeout: 5000, polling: 50 }).catch(() => {
    throw new Failure('a policy with limit 0 did not show an error message');
  });
  const errText = await text(page, 'error');
  check(/400/.test(errText) && /invalid_argument/.test(errText), 'a 400 answer shows its code and message', errText);
  console.log(`#   server said: ${errText}`);

  // 5. A narrow screen: no horizontal scrolling of the page.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForFunction(() => document.documentElement.scrollWidth <= window.innerWidth + 1, null,
    { timeout: 3000, polling: 50 }).catch(async () => {
    const sw = await page.evaluate(() => document.documentElement.scrollWidth);
    throw new Failure(`at 390 px wide the page scrolls sideways (scrollWidth ${sw})`);
  });
  check(true, 'the page fits a 390 px wide screen');
  if (process.env.SCREENSHOT_NARROW) await page.screenshot({ path: process.env.SCREENSHOT_NARROW, fullPage: true });

  check(pageErrors.length === 0, 'no script errors on the page', pageErrors.join('; '));
  check(foreign.length === 0, 'the page fetched nothing but GET / and POST /v1/check', foreign.join(', '));
}

main().then(
  () => { clearTimeout(overall); return finish(0); },
  (e) => {
    clearTimeout(overall);
    const reason = e instanceof Failure ? e.message : (e && e.stack) || String(e);
    return finish(1, `FAIL: ${reason}`);
  },
);
