// The console's measurements (issue 27, point 6), run by benches/console.rs, which starts strata,
// writes the rows and gives, in the environment:
//   STRATA_URL                 the platform listener
//   STRATA_ROOT_PASSWORD       the root user's password
//   STRATA_QUERY, STRATA_ROWS  the SQL query of the rows, and how many it answers
//   STRATA_ROUNDS              rounds of each measurement
//   STRATA_TEST_NODE_MODULES   where scripts/test installed playwright-core
// Prints one JSON object of medians (p50) on standard output; each round's figures go to
// standard error.
//
// Times are taken in the page (performance.now()), and end once the browser has laid the page
// out (a forced layout after the change), so both sides pay for style and layout alike.

import {createRequire} from 'node:module';
import {join} from 'node:path';

const require = createRequire(join(process.env.STRATA_TEST_NODE_MODULES, 'noop.js'));
const {chromium} = require('playwright-core');

const base = process.env.STRATA_URL;
const rounds = Number(process.env.STRATA_ROUNDS || 10);
const query = process.env.STRATA_QUERY;
const rows = Number(process.env.STRATA_ROWS);

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)];
};
const log = (what) => process.stderr.write(`${JSON.stringify(what)}\n`);

// Records in `window.__drawn` when the first element matching `selector` is in the document,
// after a forced layout.
const whenDrawn = (selector) => `(() => {
  window.__drawn = null;
  const seen = () => {
    if (window.__drawn !== null || !document.querySelector(${JSON.stringify(selector)})) return false;
    void document.documentElement.offsetHeight;
    window.__drawn = performance.now();
    return true;
  };
  new MutationObserver((_, observer) => { if (seen()) observer.disconnect(); })
    .observe(document, {subtree: true, childList: true, attributes: true});
})()`;

// A plain page of the console's origin (the browser serves it; strata never sees the request):
// a sign-in form with no script, and a page that fetches the rows and draws them all as a table.
const PLAIN_FORM = '<!doctype html><html lang="en"><title>plain</title><form><label>User name <input></label>'
  + '<label>Password <input type="password"></label><button type="submit">Sign in</button></form></html>';
const PLAIN_TABLE = `<!doctype html><html lang="en"><title>plain table</title><body><script>
  window.fetchRows = async (query, csrf) => {
    const response = await fetch('/sql', {method: 'POST', body: JSON.stringify({query}),
      headers: {'content-type': 'application/json', accept: 'application/json', 'x-csrf-token': csrf}});
    return response.json();
  };
  window.draw = (answer) => {
    const table = document.createElement('table');
    const head = table.createTHead().insertRow();
    for (const column of answer.columns) {
      const th = document.createElement('th');
      th.textContent = column.name;
      head.appendChild(th);
    }
    const body = table.createTBody();
    for (const row of answer.rows) {
      const tr = body.insertRow();
      for (const value of row) tr.insertCell().textContent = value === null ? '' : typeof value === 'object' ? JSON.stringify(value) : String(value);
    }
    document.body.replaceChildren(table);
    void document.documentElement.offsetHeight;
  };
</script></body></html>`;

const browser = await chromium.launch({executablePath: '/usr/bin/chromium', headless: true});
const routePlain = async (context) => {
  await context.route(`${base}/bench/form`, (route) => route.fulfill({contentType: 'text/html', body: PLAIN_FORM}));
  await context.route(`${base}/bench/table`, (route) => route.fulfill({contentType: 'text/html', body: PLAIN_TABLE}));
};

try {
  // The first load: a new context each round, so nothing is cached.
  const load = {responses: [], wire_bytes: [], body_bytes: [], console_ms: [], plain_ms: []};
  for (let round = 0; round < rounds; round += 1) {
    for (const which of round % 2 ? ['plain', 'console'] : ['console', 'plain']) {
      const context = await browser.newContext();
      await routePlain(context);
      const page = await context.newPage();
      await page.addInitScript(whenDrawn('button[type="submit"]'));
      const cdp = await context.newCDPSession(page);
      await cdp.send('Network.enable');
      let responses = 0;
      let wire = 0;
      let body = 0;
      cdp.on('Network.dataReceived', (event) => {
        body += event.dataLength;
      });
      cdp.on('Network.loadingFinished', (event) => {
        responses += 1;
        wire += event.encodedDataLength;
      });
      await page.goto(which === 'console' ? `${base}/console` : `${base}/bench/form`);
      await page.waitForFunction(() => window.__drawn !== null);
      await page.waitForLoadState('networkidle');
      const drawn = await page.evaluate(() => window.__drawn);
      if (which === 'console') {
        load.responses.push(responses);
        load.wire_bytes.push(wire);
        load.body_bytes.push(body);
        load.console_ms.push(drawn);
      } else {
        load.plain_ms.push(drawn);
      }
      log({round, load: which, ms: drawn, responses, wire, body});
      await context.close();
    }
  }

  // The rows: the console signed in on its Query page, and the plain page beside it.
  const context = await browser.newContext({viewport: {width: 1280, height: 800}});
  await routePlain(context);
  const page = await context.newPage();
  await page.goto(`${base}/console`);
  await page.getByLabel('User name').fill('root');
  await page.getByLabel('Password').fill(process.env.STRATA_ROOT_PASSWORD);
  await page.getByRole('button', {name: 'Sign in'}).click();
  await page.getByRole('button', {name: 'Sign out'}).waitFor();
  const plain = await context.newPage();
  await plain.goto(`${base}/bench/table`);
  const csrf = await plain.evaluate(async () => (await (await fetch('/console/session', {headers: {accept: 'application/json'}})).json()).csrf_token);
  if (!csrf) throw new Error('no CSRF token for the plain page');

  const render = {console_ms: [], plain_ms: [], fetch_ms: [], sort_ms: []};
  for (let round = 0; round < rounds; round += 1) {
    // The console: a fresh Query page, the query typed, Ctrl+Enter, the table drawn.
    await page.goto(`${base}/console#/query`);
    await page.reload();
    const editor = page.getByRole('textbox', {name: /^Query/});
    await editor.fill(query);
    await page.evaluate(whenDrawn('table.results tbody tr'));
    const started = await page.evaluate(() => performance.now());
    await editor.press('Control+Enter');
    await page.waitForFunction(() => window.__drawn !== null);
    const consoleMs = (await page.evaluate(() => window.__drawn)) - started;
    const status = await page.getByRole('status').innerText();
    if (!status.startsWith(`${rows.toLocaleString('en-US')} rows`)) throw new Error(`the console shows "${status}"`);
    // Sorted by its first column. The click is made inside the page, where the clock starts:
    // playwright's own click waits for the element to be stable and visible, which takes
    // longer than the sort and is not the console's time.
    await page.evaluate(whenDrawn('th[aria-sort="ascending"]'));
    const sortStarted = await page.evaluate(() => {
      const started = performance.now();
      document.querySelector('table.results th button.sort').click();
      return started;
    });
    await page.waitForFunction(() => window.__drawn !== null);
    const sortMs = (await page.evaluate(() => window.__drawn)) - sortStarted;

    // The plain page: the same fetch, then every row drawn; and the fetch alone.
    await plain.reload();
    const [fetchMs, plainMs, drawnRows] = await plain.evaluate(async ([q, token]) => {
      const fetched = performance.now();
      await window.fetchRows(q, token);
      const fetchOnly = performance.now() - fetched;
      const started = performance.now();
      const answer = await window.fetchRows(q, token);
      window.draw(answer);
      return [fetchOnly, performance.now() - started, document.querySelectorAll('tbody tr').length];
    }, [query, csrf]);
    if (drawnRows !== rows) throw new Error(`the plain page drew ${drawnRows} rows`);
    render.console_ms.push(consoleMs);
    render.sort_ms.push(sortMs);
    render.plain_ms.push(plainMs);
    render.fetch_ms.push(fetchMs);
    log({round, console_ms: consoleMs, sort_ms: sortMs, plain_ms: plainMs, fetch_ms: fetchMs});
  }
  await context.close();

  const medians = (figures) => Object.fromEntries(Object.entries(figures).map(([k, v]) => [k, median(v)]));
  console.log(JSON.stringify({load: medians(load), render: medians(render)}));
} finally {
  await browser.close();
}
