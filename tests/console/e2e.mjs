// The console in a real browser (issue 27, point 4): Debian's Chromium, headless, driven by
// playwright-core; every page checked by axe-core. Run by tests/console_browser.rs, which starts
// strata and gives, in the environment:
//   STRATA_URL                 the platform listener
//   STRATA_USER, STRATA_PASSWORD  a user that reads the dataset `logs` (its `secret` denied)
//                              and the metrics dataset `telemetry`
//   STRATA_ROOT_PASSWORD       the root user's password
//   STRATA_PG_DATABASE         a PostgreSQL database on 127.0.0.1:5432 with table `items`
//   STRATA_SHOTS               where screenshots go
//   STRATA_TEST_NODE_MODULES   where scripts/test installed playwright-core and axe-core
// Prints one JSON line per check passed; exits non-zero with the reason on the first failure.

import {createRequire} from 'node:module';
import {mkdirSync, readFileSync} from 'node:fs';
import {join} from 'node:path';
import assert from 'node:assert/strict';

const modules = process.env.STRATA_TEST_NODE_MODULES;
const require = createRequire(join(modules, 'noop.js'));
const {chromium} = require('playwright-core');
const axeSource = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

const base = process.env.STRATA_URL;
const shots = process.env.STRATA_SHOTS;
mkdirSync(shots, {recursive: true});

function passed(check, detail = {}) {
  console.log(JSON.stringify({check, ...detail}));
}

/** axe-core's serious and critical violations on the page as it is now. */
async function accessibility(context, page, name) {
  // axe runs in a page of its own context that may run it (the console's policy allows no
  // script but its own), on the same URL and session.
  const audit = await context.newPage();
  await audit.goto(page.url());
  await audit.waitForLoadState('networkidle');
  await audit.evaluate(axeSource);
  const result = await audit.evaluate(() => window.axe.run(document, {resultTypes: ['violations']}));
  await audit.close();
  const bad = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  assert.deepEqual(
    bad.map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`),
    [],
    `${name}: serious or critical accessibility violations`,
  );
  passed('accessibility', {page: name, violations: result.violations.length});
}

const browser = await chromium.launch({executablePath: '/usr/bin/chromium', headless: true});
// The page being driven, screenshot as `failure.png` when a check fails.
let current = null;
try {
  for (const [theme, viewport] of [['light', {width: 1280, height: 800}], ['dark', {width: 390, height: 844}]]) {
    const context = await browser.newContext({viewport, colorScheme: theme});
    const axeContext = await browser.newContext({viewport, colorScheme: theme, bypassCSP: true});
    const page = await context.newPage();
    current = page;
    const violations = [];
    page.on('console', (message) => {
      if (/Content Security Policy|Refused to/.test(message.text())) violations.push(message.text());
    });
    page.on('pageerror', (error) => violations.push(String(error)));

    // Sign in: a wrong password is said so, the right one opens the console.
    await page.goto(`${base}/console`);
    await page.getByLabel('User name').fill(process.env.STRATA_USER);
    await page.getByLabel('Password').fill('wrong-horse-battery');
    await page.getByRole('button', {name: 'Sign in'}).click();
    await page.getByRole('alert').filter({hasText: 'wrong'}).waitFor();
    await page.screenshot({path: join(shots, `sign-in-${theme}.png`), fullPage: true});
    await accessibility(axeContext, page, `sign-in (${theme})`);
    await page.getByLabel('Password').fill(process.env.STRATA_PASSWORD);
    await page.getByRole('button', {name: 'Sign in'}).click();
    await page.getByRole('heading', {name: 'Datasets'}).waitFor();
    passed('signed in', {theme});

    // The session is the cookie's: the axe context signs in too.
    const cookies = await context.cookies();
    const session = cookies.find((c) => c.name === 'strata_session');
    assert.ok(session && session.httpOnly && session.sameSite === 'Strict', 'an HttpOnly, SameSite=Strict cookie');
    await axeContext.addCookies([session]);

    // Datasets: the dataset the user reads, with its count.
    const row = page.getByRole('row').filter({hasText: 'logs'});
    await row.waitFor();
    assert.match(await row.innerText(), /logs\s+3\b/);
    await page.screenshot({path: join(shots, `datasets-${theme}.png`), fullPage: true});
    await accessibility(axeContext, page, `datasets (${theme})`);
    passed('datasets listed', {theme});

    // The theme follows the system's.
    const background = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    assert.equal(background, theme === 'dark' ? 'rgb(13, 17, 23)' : 'rgb(255, 255, 255)');
    passed('theme', {theme, background});

    // The menu is reached and followed with the keyboard.
    await page.getByRole('link', {name: 'strata'}).focus();
    await page.keyboard.press('Tab');
    const focused = await page.evaluate(() => document.activeElement.textContent);
    assert.equal(focused, 'Datasets');
    await page.keyboard.press('Enter');
    assert.equal(new URL(page.url()).hash, '#/datasets');
    passed('keyboard', {theme});

    // Query: SQL rows in the table, their bars; export as CSV.
    await page.getByRole('link', {name: 'Query'}).click();
    await page.getByRole('heading', {name: 'Query'}).waitFor();
    await page.getByRole('textbox', {name: /^Query/}).fill('SELECT host, COUNT(*) AS n FROM logs GROUP BY host ORDER BY host');
    await page.getByRole('textbox', {name: /^Query/}).press('Control+Enter');
    await page.getByRole('status').filter({hasText: '2 rows'}).waitFor();
    const cells = await page.locator('table.results tbody tr').allInnerTexts();
    assert.deepEqual(cells.map((c) => c.split('\t')), [['a', '2'], ['b', '1']]);
    passed('sql rows', {theme});
    await page.getByRole('tab', {name: 'Chart'}).click();
    await page.getByRole('img', {name: 'Bar chart'}).locator('canvas').first().waitFor();
    const [saved] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', {name: 'Export CSV'}).click(),
    ]);
    assert.equal(saved.suggestedFilename(), 'result.csv');
    assert.equal(readFileSync(await saved.path(), 'utf8'), 'host,n\r\na,2\r\nb,1\r\n');
    passed('export', {theme});
    await page.screenshot({path: join(shots, `query-sql-${theme}.png`), fullPage: true});

    // A PromQL range over the last hour: a line chart with its points drawn.
    await page.getByLabel('Language').selectOption('promql');
    await page.getByRole('textbox', {name: /^Query/}).fill('sum by (job) (http_requests_total)');
    await page.getByRole('button', {name: 'Run'}).click();
    const line = page.getByRole('img', {name: 'Line chart'});
    await line.locator('canvas').first().waitFor();
    const painted = await line.locator('canvas').first().evaluate((canvas) => {
      const pixels = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
      let drawn = 0;
      for (let i = 3; i < pixels.length; i += 4) if (pixels[i] > 0) drawn += 1;
      return drawn;
    });
    assert.ok(painted > 200, `the line chart has ${painted} painted pixels`);
    const legend = await line.locator('.u-legend .u-series').allInnerTexts();
    assert.ok(legend.some((t) => t.includes('job="api"')) && legend.some((t) => t.includes('job="web"')), `legend: ${legend}`);
    passed('promql line chart', {theme, painted});
    await page.screenshot({path: join(shots, `query-promql-${theme}.png`), fullPage: true});
    await accessibility(axeContext, page, `query (${theme})`);

    // Chat: a thread about `logs`, a question answered over the socket, its number shown.
    await page.getByRole('link', {name: 'Chat'}).click();
    await page.getByLabel('Thread name').fill(`records ${theme}`);
    await page.getByLabel('Dataset').fill('logs');
    await page.getByRole('button', {name: 'New thread'}).click();
    await page.getByRole('region', {name: `Thread records ${theme}`}).waitFor();
    await page.getByLabel('Your question').fill('how many records are in logs?');
    await page.getByRole('button', {name: 'Ask'}).click();
    const answer = page.locator('.messages .assistant .answer');
    await answer.waitFor();
    assert.match(await answer.locator('p').first().innerText(), /\b3\b/);
    assert.equal(await answer.locator('.big-number output').innerText(), '3');
    await answer.getByText('The SQL query it ran').click();
    assert.equal(await answer.locator('pre').innerText(), 'SELECT COUNT(*) AS "count" FROM "logs"');
    passed('chat answer', {theme});
    await page.screenshot({path: join(shots, `chat-${theme}.png`), fullPage: true});
    await accessibility(axeContext, page, `chat (${theme})`);

    // A reload keeps the session (the CSRF token is read again), and sign-out ends it.
    await page.reload();
    await page.getByRole('heading', {name: 'Chat'}).waitFor();
    await page.getByRole('button', {name: 'Sign out'}).click();
    await page.getByRole('button', {name: 'Sign in'}).waitFor();
    const after = await page.evaluate(async () => (await fetch('/metadata')).status);
    assert.equal(after, 401);
    passed('signed out', {theme});

    assert.deepEqual(violations, [], 'no policy violation and no script error');
    await context.close();
    await axeContext.close();
  }

  // Govern, as the root user: a role that masks `host`, a user holding it; signed in as that
  // user, the console shows `host` masked.
  const context = await browser.newContext({viewport: {width: 1280, height: 800}});
  const axeContext = await browser.newContext({viewport: {width: 1280, height: 800}, bypassCSP: true});
  const page = await context.newPage();
  current = page;
  const signIn = async (user, password) => {
    await page.goto(`${base}/console`);
    await page.getByLabel('User name').fill(user);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', {name: 'Sign in'}).click();
    await page.getByRole('button', {name: 'Sign out'}).waitFor();
  };
  await signIn('root', process.env.STRATA_ROOT_PASSWORD);

  // Datasets, as the root user: create one, upload 1,200 records of CSV (three bulk requests,
  // a progress bar), see its mapping, count and sample; delete another.
  await page.getByLabel('New dataset').fill('uploads');
  await page.getByRole('button', {name: 'Create dataset'}).click();
  await page.getByRole('heading', {name: 'uploads'}).waitFor();
  const csv = ['city,visits,note', ...Array.from({length: 1200}, (_, i) => `${['paris', 'lima', 'oslo'][i % 3]},${i},"a, ""quoted"" note"`)].join('\r\n');
  await page.getByLabel(/^Upload NDJSON or CSV/).setInputFiles({name: 'visits.csv', mimeType: 'text/csv', buffer: Buffer.from(csv)});
  await page.getByRole('button', {name: 'Upload', exact: true}).click();
  await page.getByRole('status').filter({hasText: '1,200 of 1,200 records'}).waitFor();
  assert.equal(await page.locator('progress').getAttribute('value'), '1200');
  await page.getByRole('row').filter({hasText: 'uploads'}).filter({hasText: '1,200'}).waitFor();
  await page.getByRole('cell', {name: 'visits', exact: true}).waitFor();
  const sampleNote = await page.locator('section table.results tbody tr').first().innerText();
  assert.match(sampleNote, /a, "quoted" note/);
  passed('upload');
  await page.screenshot({path: join(shots, 'dataset-upload-light.png'), fullPage: true});
  await page.getByLabel('New dataset').fill('scratch');
  await page.getByRole('button', {name: 'Create dataset'}).click();
  await page.getByRole('heading', {name: 'scratch'}).waitFor();
  page.once('dialog', (dialog) => dialog.accept());
  await page.getByRole('button', {name: 'Delete scratch'}).click();
  await page.getByRole('heading', {name: 'scratch'}).waitFor({state: 'detached'});
  await page.getByRole('row').filter({hasText: 'scratch'}).waitFor({state: 'detached'});
  passed('dataset deleted');

  // Monitors, as the root user: one created from its document, executed as a dry run, then
  // for real; its run in the history.
  await page.getByRole('link', {name: 'Monitors'}).click();
  const monitor = {
    name: 'hosts a', schedule: {period: {interval: 1, unit: 'DAYS'}},
    query: {type: 'sql', statement: "SELECT COUNT(*) FROM logs WHERE host = 'a'"},
    triggers: [{name: 'two or more', severity: 1, condition: {type: 'field_greater_than', path: '/rows/0/0', value: 1}, actions: []}],
  };
  await page.getByLabel(/^New monitor/).fill(JSON.stringify(monitor));
  await page.getByRole('button', {name: 'Test (not saved)'}).click();
  await page.getByRole('status').filter({hasText: 'triggered: two or more'}).waitFor();
  assert.equal(await page.getByRole('status').locator('time').count(), 5, 'the next five run times');
  assert.equal(await page.getByText('No monitors yet.').count(), 1, 'a test run saves nothing');
  await page.getByRole('button', {name: 'Create monitor'}).click();
  await page.getByRole('heading', {name: 'hosts a'}).waitFor();
  await page.getByRole('button', {name: 'Execute as a dry run'}).click();
  await page.getByRole('status').filter({hasText: 'triggered: two or more'}).waitFor();
  await page.getByText('No runs yet.').waitFor();
  await page.getByRole('button', {name: 'Execute', exact: true}).click();
  await page.getByRole('row').filter({hasText: 'executed'}).filter({hasText: 'triggered: two or more'}).waitFor();
  passed('monitor executed');
  await page.screenshot({path: join(shots, 'monitors-light.png'), fullPage: true});
  await axeContext.addCookies((await context.cookies()).filter((c) => c.name === 'strata_session'));
  await accessibility(axeContext, page, 'monitors (light)');

  // Connections, as the root user: PostgreSQL found in the catalogue, connected with its form,
  // tested, and queried in place.
  await page.getByRole('link', {name: 'Connections'}).click();
  await page.getByLabel(/^Search the/).fill('postgres');
  await page.getByRole('button', {name: 'PostgreSQL', exact: true}).click();
  await page.getByLabel('Connection name').fill('pg');
  await page.getByLabel('host', {exact: true}).fill('127.0.0.1');
  await page.getByLabel('port', {exact: true}).fill('5432');
  await page.getByLabel('username', {exact: true}).fill('postgres');
  assert.equal(await page.getByLabel('password', {exact: true}).getAttribute('type'), 'password');
  await page.getByLabel('database', {exact: true}).fill(process.env.STRATA_PG_DATABASE);
  await page.getByRole('button', {name: 'Create connection'}).click();
  await page.getByRole('heading', {name: 'pg', exact: true}).waitFor();
  await page.getByRole('button', {name: 'Test connection'}).click();
  await page.getByRole('status').filter({hasText: 'active, 1 datasets'}).waitFor();
  await page.getByLabel('SQL in place').fill('SELECT name, weight FROM items ORDER BY name');
  await page.getByRole('button', {name: 'Run in place'}).click();
  await page.locator('table.results tbody tr').first().waitFor();
  const items = await page.locator('table.results tbody tr').allInnerTexts();
  assert.deepEqual(items.map((r) => r.split('\t')), [['bolt', '2.5'], ['nut', '1']]);
  passed('connection queried');
  await page.screenshot({path: join(shots, 'connections-light.png'), fullPage: true});
  await accessibility(axeContext, page, 'connections (light)');

  await page.getByRole('link', {name: 'Govern'}).click();
  await page.getByLabel('Role name').fill('masked');
  await page.getByLabel(/^Datasets/).fill('logs');
  await page.getByRole('button', {name: 'Add a mask'}).click();
  await page.getByLabel('Masked field').fill('host');
  await page.getByRole('combobox', {name: /^Mask/}).selectOption('redact');
  await page.getByRole('button', {name: 'Save role'}).click();
  await page.getByRole('button', {name: 'Edit masked'}).waitFor();
  await page.getByLabel('User name').fill('cid');
  await page.getByRole('textbox', {name: /^Password/}).fill('cid-horse-battery');
  await page.getByRole('textbox', {name: /^Roles/}).fill('masked');
  await page.getByRole('button', {name: 'Create user'}).click();
  await page.getByRole('status').filter({hasText: 'Keys of cid'}).waitFor();
  await page.getByRole('cell', {name: 'cid', exact: true}).waitFor();
  passed('govern');
  await page.screenshot({path: join(shots, 'govern-light.png'), fullPage: true});
  await axeContext.addCookies((await context.cookies()).filter((c) => c.name === 'strata_session'));
  await accessibility(axeContext, page, 'govern (light)');
  await page.getByRole('button', {name: 'Sign out'}).click();
  await page.getByRole('button', {name: 'Sign in'}).waitFor();

  await signIn('cid', 'cid-horse-battery');
  assert.equal(await page.getByRole('link', {name: 'Govern'}).count(), 0, 'no Govern for a user that is not root');
  await page.getByRole('link', {name: 'Query'}).click();
  await page.getByRole('textbox', {name: /^Query/}).fill('SELECT host FROM logs');
  await page.getByRole('button', {name: 'Run'}).click();
  await page.getByRole('status').filter({hasText: '3 rows'}).waitFor();
  const hosts = await page.locator('table.results tbody td').allInnerTexts();
  assert.deepEqual(hosts, ['*', '*', '*'], 'host is masked');
  passed('masked field');
  await context.close();
  await axeContext.close();
} catch (error) {
  if (current) await current.screenshot({path: join(shots, 'failure.png'), fullPage: true}).catch(() => {});
  throw error;
} finally {
  await browser.close();
}
