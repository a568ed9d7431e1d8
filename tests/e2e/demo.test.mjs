// End-to-end test of the floodgate demo page, driven in Debian's Chromium via playwright-core.
//
//   FLOODGATE_URL=http://127.0.0.1:8080 SCREENSHOT=/tmp/demo.png node demo.test.mjs
//
// Needs a running `floodgate serve` (memory:// store is fine) and /usr/bin/chromium
// (`apt-get install -y chromium`); never downloads a browser. Exits 0 when every check
// passes, 1 on the first failure (with the reason), and gives up after 240 s overall.
// Every wait below ends with the event it waits for; its bound (HANG_GUARD_MS) only ends a
// run that would otherwise hang, and never judges how fast the page or the server was.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const BASE = (process.env.FLOODGATE_URL || 'http://127.0.0.1:8080').replace(/\/+$/, '');
const SCREENSHOT = process.env.SCREENSHOT || path.join(os.tmpdir(), 'floodgate-demo.png');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
// The store the page must say is in use, by its scheme (memory://, redis://...).
const EXPECT_STORE = process.env.EXPECT_STORE || '';
const OVERALL_MS = 240_000;
const HANG_GUARD_MS = 60_000;
const BURST_WAIT_MS = HANG_GUARD_MS;

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
    degraded: Number(document.querySelector('[data-testid="degraded-count"]').textContent),
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

// Every POST /v1/check the page makes, as the server answered it:
// { sent, status, headers, answer }.
const checkCalls = [];
const callWaiters = [];

function recordCheckCalls(page) {
  page.on('response', async (res) => {
    const req = res.request();
    if (req.method() !== 'POST' || new URL(res.url()).pathname !== '/v1/check') return;
    let sent = null, answer = null;
    try { sent = JSON.parse(req.postData() || 'null'); } catch {}
    try { answer = JSON.parse(await res.text()); } catch {}
    checkCalls.push({ sent, status: res.status(), headers: res.headers(), answer });
    for (const w of callWaiters.splice(0)) w();
  });
}

// Resolves (bounded) once `n` answers to requests matching `pred` have been seen on the wire.
async function waitForCalls(pred, n) {
  const deadline = Date.now() + BURST_WAIT_MS;
  for (;;) {
    const got = checkCalls.filter(pred);
    if (got.length >= n) return got;
    if (Date.now() > deadline) throw new Failure(`only ${got.length} of ${n} answers seen on the network`);
    await new Promise((resolve) => {
      callWaiters.push(resolve);
      setTimeout(resolve, Math.max(0, deadline - Date.now()) + 1);
    });
  }
}

// The log as the page renders it with two stacked limits: per row the result, the names of
// the limits shown as having denied, and each limit's remaining (by the name shown next to
// it; "not asked" for a limit the server did not consult), newest first.
async function stackedRows(page) {
  return page.evaluate(() => Array.from(document.querySelectorAll('[data-testid="log"] tbody tr[data-result]'))
    .map((tr) => ({
      result: tr.dataset.result,
      resultText: tr.cells[2].textContent.trim(),
      deniedBy: Array.from(tr.querySelectorAll('[data-testid="denied-by"] .chip')).map((c) => c.textContent.trim()),
      remaining: Object.fromEntries(Array.from(tr.querySelectorAll('[data-testid="item-remaining"]'))
        .map((iv) => [iv.querySelector('.chip').textContent.trim(), iv.querySelector('.v').textContent.trim()])),
    })));
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
  page.setDefaultTimeout(HANG_GUARD_MS);  // actions wait for their element: a guard, not a speed

  const pageErrors = [];
  const foreign = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('console', (m) => {
    // Chromium logs every non-2xx fetch ("Failed to load resource"); the 400 check below causes
    // one on purpose.
    if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) pageErrors.push(`console: ${m.text()}`);
  });
  recordCheckCalls(page);
  page.on('request', (req) => {
    const u = new URL(req.url());
    if (u.protocol === 'data:') return;
    const ok = u.origin === new URL(BASE).origin && (u.pathname === '/' || u.pathname === '/v1/check');
    if (!ok) foreign.push(`${req.method()} ${req.url()}`);
  });

  // 1. The page loads and shows the store and version the server filled in.
  let response;
  try {
    response = await page.goto(`${BASE}/`, { waitUntil: 'load', timeout: HANG_GUARD_MS });
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

  // 2. fixed_window, 5 per hour, a burst of 20 on a fresh key: exactly 5 allowed. An hour,
  // not a minute: windows are aligned to the epoch, and a burst that straddles a window's
  // end is rightly admitted 5 more (a clean-clone run met a minute's end mid-burst).
  await setPolicy(page, { algorithm: 'fixed_window', limit: 5, period: 1, unit: 'h' });
  check(await testid(page, 'burst').isHidden(), 'burst is hidden for fixed_window');
  check(await text(page, 'policy') === 'fixed_window:5/1h', 'the policy string updates live',
    JSON.stringify(await text(page, 'policy')));
  await testid(page, 'new-key').click();
  const key1 = await text(page, 'key');
  check(/^demo:\S+$/.test(key1), 'a demo key is shown', JSON.stringify(key1));
  await testid(page, 'burst-size').fill('20');
  await testid(page, 'send-burst').click();
  let c = await waitForAnswers(page, 20);
  check(c.allowed === 5 && c.denied === 15, 'fixed_window:5/1h burst of 20: 5 allowed, 15 denied',
    `allowed ${c.allowed}, denied ${c.denied}, degraded ${c.degraded}`);
  check(c.degraded === 0, 'every answer came from the store (none degraded)', JSON.stringify(c));

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

  // 2b. The same policy with a penalty block (block=15m) on a new key: the first denial
  // blocks the key, and the page says so.
  await testid(page, 'block').fill('15m');
  check(await text(page, 'policy') === 'fixed_window:5/1h,block=15m', 'the policy string carries block=',
    JSON.stringify(await text(page, 'policy')));
  await testid(page, 'new-key').click();
  await testid(page, 'burst-size').fill('8');
  await testid(page, 'send-burst').click();
  c = await waitForAnswers(page, 8);
  check(c.allowed === 5 && c.denied === 3, 'fixed_window:5/1h,block=15m burst of 8: 5 allowed, 3 denied',
    `allowed ${c.allowed}, denied ${c.denied}`);
  // A burst's answers may arrive in any order (Redis): one request more is the last answer.
  await testid(page, 'send-one').click();
  c = await waitForAnswers(page, 9);
  check(c.denied === 4, 'the request after the burst is denied', JSON.stringify(c));
  const blockedBody = JSON.parse(await text(page, 'last-body'));
  check(blockedBody.blocked === true && blockedBody.retry_after_us >= 899_000_000,
    'the last answer is blocked for about 15 minutes', JSON.stringify(blockedBody));
  check((await page.locator('#last-verdict').textContent()).includes('(blocked)') &&
    (await page.locator('#last-detail').textContent()).includes('blocked for'),
    'the last answer reads blocked, and for how long',
    `${await page.locator('#last-verdict').textContent()} / ${await page.locator('#last-detail').textContent()}`);
  await testid(page, 'block').fill('');

  // 2c. Waiting for a slot (delay=): gcra:2/1s,burst=1,delay=5s on a new key, a burst of 4. One
  //     proceeds at once; the others are admitted to proceed later, each half a second after
  //     the one before. The timeline draws each delayed admission where it proceeds (its answer
  //     + delay_us), as a mark of its own, and the immediate one as a plain dot.
  check(await testid(page, 'delay-field').isHidden(), 'the delay field is hidden for fixed_window');
  await setPolicy(page, { algorithm: 'gcra', limit: 2, period: 1, unit: 's' });
  await testid(page, 'burst').fill('1');
  await testid(page, 'delay').fill('5s');
  check(await text(page, 'policy') === 'gcra:2/1s,burst=1,delay=5s', 'the policy string carries delay=',
    JSON.stringify(await text(page, 'policy')));
  await testid(page, 'new-key').click();
  const keyD = await text(page, 'key');
  await testid(page, 'burst-size').fill('4');
  await testid(page, 'send-burst').click();
  c = await waitForAnswers(page, 4);
  const delayCalls = await waitForCalls((k) => k.sent && k.sent.key === keyD, 4);
  const wireDelays = delayCalls.map((k) => (k.answer && k.answer.delay_us) || 0).sort((a, b) => a - b);
  check(c.allowed === 4 && delayCalls.every((k) => k.answer && k.answer.allowed === true) &&
    wireDelays[0] === 0 && wireDelays.slice(1).every((d) => d > 0 && d <= 5_000_000),
  'gcra:2/1s,burst=1,delay=5s burst of 4: all admitted, one at once and three with a delay',
  `page allowed ${c.allowed}; server delays ${JSON.stringify(wireDelays)}`);
  check(await text(page, 'delayed-count') === '3', 'the page counts 3 delayed admissions',
    await text(page, 'delayed-count'));
  // The delayed marks are drawn once their time is on the chart (the axis follows the clock).
  const marked = await page.waitForFunction(() => {
    const cv = document.querySelector('[data-testid="chart"]');
    const marks = JSON.parse(cv.dataset.delayedMarks || '[]');
    if (marks.length !== 3 || !marks.every((m) => m.shown)) return null;
    const dpr = window.devicePixelRatio || 1;
    const ctx = cv.getContext('2d');
    const delays = Object.fromEntries(Array.from(document.querySelectorAll('[data-testid="log-row"]'))
      .map((tr) => [tr.cells[0].textContent.trim(), Number(tr.dataset.delayUs || 0)]));
    return {
      pxPerSecond: Number(cv.dataset.pxPerSecond),
      marks: marks.map((m) => ({ ...m, delayUs: delays[String(m.seq)],
        pixel: Array.from(ctx.getImageData(Math.round(m.xp * dpr), Math.round(m.y * dpr), 1, 1).data) })),
    };
  }, null, { timeout: HANG_GUARD_MS, polling: 100 }).then((h) => h.jsonValue()).catch(() => {
    throw new Failure('the timeline never drew the 3 delayed admissions within the chart');
  });
  const pageDelays = marked.marks.map((m) => m.delayUs).sort((a, b) => a - b);
  check(JSON.stringify(pageDelays) === JSON.stringify(wireDelays.slice(1)),
    'the timeline marks exactly the delayed admissions, with the delays the server answered',
    `marked ${JSON.stringify(pageDelays)}, server ${JSON.stringify(wireDelays)}`);
  check(marked.pxPerSecond > 0 && marked.marks.every((m) =>
    Math.abs((m.xp - m.x) - m.delayUs / 1e6 * marked.pxPerSecond) < 1),
  'each delayed admission is drawn where it proceeds: its answer + delay_us on the time axis',
  JSON.stringify(marked));
  const isGreen = ([r, g, b, a]) => a >= 200 && g > 100 && g > r * 1.6 && g > b * 1.4;
  check(marked.marks.every((m) => isGreen(m.pixel)), 'the canvas shows each delayed admission there',
    JSON.stringify(marked.marks.map((m) => m.pixel)));
  const delayRows = await logRows(page);
  check(delayRows.filter((r) => r.cells[2].includes('proceeds +')).length === 3,
    'the log says when each delayed request proceeds', JSON.stringify(delayRows));
  await testid(page, 'delay').fill('');
  await testid(page, 'burst').fill('');

  // 3. sliding_log, 3 per minute, on a new key: a burst of 6 gives 3 allowed, 3 denied.
  await setPolicy(page, { algorithm: 'sliding_log', limit: 3, period: 1, unit: 'm' });
  await testid(page, 'new-key').click();
  const key2 = await text(page, 'key');
  check(key2 !== key1 && /^demo:\S+$/.test(key2), 'New key switches to a fresh key', `${key1} -> ${key2}`);
  c = await counts(page);
  check(c.allowed === 0 && c.denied === 0, 'New key resets the counters', JSON.stringify(c));
  check(!(await testid(page, 'block-field').isHidden()), 'the block field shows for sliding_log too');
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
  }, null, { timeout: HANG_GUARD_MS, polling: 50 }).catch(() => {
    throw new Failure('a policy with limit 0 did not show an error message');
  });
  const errText = await text(page, 'error');
  check(/400/.test(errText) && /invalid_argument/.test(errText), 'a 400 answer shows its code and message', errText);
  console.log(`#   server said: ${errText}`);

  // 5. Two stacked limits, one all-or-nothing decision: a longer sliding_log:12/1h and a tight
  //    gcra:4/1h (neither refills during the test). A burst of 10 on a new key: 4 allowed, the
  //    6 denials name the tight limit, and the longer limit keeps what the denials did not take.
  //    Everything is read from the rendered page and held against the answers on the wire.
  await setPolicy(page, { algorithm: 'sliding_log', limit: 12, period: 1, unit: 'h' });
  check(await testid(page, 'stack-fields').isHidden(), 'the second limit is off by default');
  await testid(page, 'stack').check();
  check(await testid(page, 'stack-fields').isVisible(), 'checking "Stack a second limit" shows its fields');
  await testid(page, 'algorithm2').selectOption('gcra');
  await testid(page, 'limit2').fill('4');
  await testid(page, 'period2').fill('1');
  await testid(page, 'period-unit2').selectOption('h');
  await testid(page, 'burst2').fill('');
  check(await text(page, 'policy2') === 'gcra:4/1h' && await text(page, 'policy') === 'sliding_log:12/1h',
    'both policy strings update live', `${await text(page, 'policy')} / ${await text(page, 'policy2')}`);
  await testid(page, 'new-key').click();
  const key3 = await text(page, 'key');
  check(key3 !== key2 && /^demo:\S+$/.test(key3), 'New key with stacked limits', key3);
  await testid(page, 'burst-size').fill('10');
  await testid(page, 'send-burst').click();
  c = await waitForAnswers(page, 10);
  const calls = await waitForCalls((k) => k.sent && Array.isArray(k.sent.items) && k.sent.items[0].key === key3, 10);
  check(calls.length === 10 && calls.every((k) => k.status === 200 && k.sent.items.length === 2 &&
    k.answer && Array.isArray(k.answer.items) && k.answer.items.length === 2),
  'every request of the burst was one decision over both limits, answered 200 with both items',
  JSON.stringify(calls.map((k) => [k.status, k.sent && k.sent.items && k.sent.items.length])));
  const sentItems = calls[0].sent.items;
  const tight = sentItems.find((it) => it.policy === 'gcra:4/1h');
  const loose = sentItems.find((it) => it.policy === 'sliding_log:12/1h');
  check(tight && loose && tight.name && loose.name && tight.name !== loose.name && tight.key !== loose.key,
    'the two limits go out with their own names and keys', JSON.stringify(sentItems));
  console.log(`#   tight limit "${tight.name}" on ${tight.key}, longer limit "${loose.name}" on ${loose.key}`);

  const answers = calls.map((k) => k.answer);
  const wireAllowed = answers.filter((a) => a.allowed === true).length;
  check(wireAllowed === 4 && c.allowed === 4 && c.denied === 6,
    'stacked gcra:4/1h on sliding_log:12/1h, burst of 10: 4 allowed, 6 denied (page and server agree)',
    `page allowed ${c.allowed}, denied ${c.denied}; server allowed ${wireAllowed}`);
  const wireDenied = answers.filter((a) => a.allowed === false);
  check(wireDenied.length === 6 && wireDenied.every((a) => JSON.stringify(a.denied_by) === JSON.stringify([tight.name])),
    `the server's denied_by names the tight limit "${tight.name}" on every denial`,
    JSON.stringify(wireDenied.map((a) => a.denied_by)));

  rows = await stackedRows(page);
  const shownDenied = rows.filter((r) => r.result === 'denied');
  check(rows.length === 10 && shownDenied.length === 6 &&
    shownDenied.every((r) => r.deniedBy.length === 1 && r.deniedBy[0] === tight.name &&
      r.resultText.includes(tight.name) && !r.resultText.includes(loose.name)),
  `every denied row in the log says it was denied by "${tight.name}"`, JSON.stringify(shownDenied));
  check(rows.filter((r) => r.result === 'allowed').every((r) => r.deniedBy.length === 0),
    'allowed rows name no denying limit', JSON.stringify(rows));
  // The page shows, for each request, what the server said of each limit (as multisets:
  // with 4 requests in flight the log's order need not be the server's).
  const tuple = (result, deniedBy, rem) => [result, deniedBy.join('+'), rem[tight.name], rem[loose.name]].join('|');
  const shownTuples = rows.map((r) => tuple(r.result, r.deniedBy, r.remaining)).sort();
  const wireTuples = calls.map((k) => tuple(k.answer.allowed ? 'allowed' : 'denied', k.answer.denied_by || [],
    Object.fromEntries(k.answer.items.map((it) => [it.name,
      it.consulted !== false ? String(it.remaining) : 'not asked'])))).sort();
  check(JSON.stringify(shownTuples) === JSON.stringify(wireTuples),
    "the log shows both limits' remaining and denied_by exactly as the server answered",
    `page ${JSON.stringify(shownTuples)} server ${JSON.stringify(wireTuples)}`);

  // All or nothing: the longer limit lost exactly one per allowed request, none for a denial.
  const looseLimit = answers[0].items.find((it) => it.name === loose.name).limit;
  const looseShown = (r) => r.remaining[loose.name];
  const allowedLoose = rows.filter((r) => r.result === 'allowed').map((r) => Number(looseShown(r))).sort((a, b) => b - a);
  const deniedLoose = shownDenied.map(looseShown);
  const deniedAsked = deniedLoose.filter((v) => v !== 'not asked');
  check(looseLimit === 12 && JSON.stringify(allowedLoose) === JSON.stringify([1, 2, 3, 4].map((i) => looseLimit - i)),
    `"${loose.name}" went down by one for each of the 4 admitted requests`,
    `limit ${looseLimit}; allowed rows ${JSON.stringify(allowedLoose)}`);
  // Every denial the store decided reports the longer limit as it stands (the first denial
  // always reaches the store; later ones may come from a denial cache, which asks nothing).
  check(deniedAsked.length >= 1 && deniedAsked.every((v) => v === String(looseLimit - 4)),
    `"${loose.name}" shows ${looseLimit - 4} left on every denial that asked it: the denials did not drop it`,
    `denied rows ${JSON.stringify(deniedLoose)}`);
  console.log(`#   ${deniedAsked.length} of 6 denials asked "${loose.name}", ` +
    `${6 - deniedAsked.length} were answered by the denial cache`);
  const byCounts = await page.evaluate(() => Object.fromEntries(Array.from(
    document.querySelectorAll('[data-testid="denied-by-count"]')).map((b) => [b.dataset.limit, Number(b.textContent)])));
  check(byCounts[tight.name] === 6 && byCounts[loose.name] === 0, 'the denials are counted per limit',
    JSON.stringify(byCounts));

  // A peek (cost 0) after the burst: the longer limit still has exactly what the 4
  // admissions left, so none of the 6 denials (cached or not) took anything from it.
  await testid(page, 'cost').fill('0');
  await testid(page, 'send-one').click();
  c = await waitForAnswers(page, 11);
  const [peekCall] = await waitForCalls((k) => k.sent && Array.isArray(k.sent.items) && k.sent.items[0].key === key3 &&
    k.sent.items.every((it) => it.cost === 0), 1);
  const peekRow = (await stackedRows(page))[0];
  const peekWire = Object.fromEntries(peekCall.answer.items.map((it) => [it.name, String(it.remaining)]));
  check(peekRow.result === 'allowed' && peekRow.remaining[loose.name] === String(looseLimit - 4) &&
    peekRow.remaining[tight.name] === '0' && peekWire[loose.name] === peekRow.remaining[loose.name] &&
    peekWire[tight.name] === peekRow.remaining[tight.name],
  `a peek (cost 0) after the burst shows "${loose.name}" still at ${looseLimit - 4}: the denials took nothing`,
  `page ${JSON.stringify(peekRow)}, server ${JSON.stringify(peekWire)}`);

  // The raw panels show the real multi-decision request (the peek) and the server's headers for
  // both limits.
  const lastReq = await text(page, 'last-request');
  const lastSent = JSON.parse(lastReq.slice(lastReq.indexOf('{')));
  check(/^POST v1\/check/.test(lastReq) && JSON.stringify(lastSent.items.map((it) => it.name)) ===
    JSON.stringify(sentItems.map((it) => it.name)), 'the last request shows the items payload', lastReq);
  const shownHeaders = await text(page, 'last-headers');
  const policyHeader = peekCall.headers['ratelimit-policy'] || '';
  check(policyHeader.includes(`"${tight.name}"`) && policyHeader.includes(`"${loose.name}"`) &&
    shownHeaders.includes(`RateLimit-Policy: ${policyHeader}`),
  'the headers panel shows RateLimit-Policy listing both limits', `${policyHeader} / ${shownHeaders}`);
  const lastBody = JSON.parse(await text(page, 'last-body'));
  const bodyItem = (name) => lastBody.items.find((it) => it.name === name);
  check((await text(page, 'remaining-text')).startsWith(`${bodyItem(loose.name).remaining} of `) &&
    (await text(page, 'remaining2-text')).startsWith(`${bodyItem(tight.name).remaining} of `),
  'each limit has its remaining meter, matching the last answer',
  `${await text(page, 'remaining-text')} / ${await text(page, 'remaining2-text')}`);
  const stackedShot = SCREENSHOT.replace(/(\.png)?$/, '-stacked.png');
  await page.screenshot({ path: stackedShot, fullPage: true });
  console.log(`#   stacked screenshot ${stackedShot}`);

  // 6. A narrow screen: no horizontal scrolling of the page.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForFunction(() => document.documentElement.scrollWidth <= window.innerWidth + 1, null,
    { timeout: HANG_GUARD_MS, polling: 50 }).catch(async () => {
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
