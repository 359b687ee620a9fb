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

/** axe-core's serious and critical violations on the page as it is now (results, editors and
 * all): axe is evaluated by the browser's debugging protocol, which the page's policy does not
 * govern, so the page runs nothing but its own scripts. */
async function accessibility(page, name) {
  if (!(await page.evaluate(() => Boolean(window.axe)))) await page.evaluate(axeSource);
  const result = await page.evaluate(() => window.axe.run(document, {resultTypes: ['violations']}));
  const bad = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  assert.deepEqual(
    bad.map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`),
    [],
    `${name}: serious or critical accessibility violations`,
  );
  // axe ran its rules over the page as it is (a page it could not read passes nothing).
  assert.ok(result.passes.length >= 10, `${name}: axe passed only ${result.passes.length} rules`);
  passed('accessibility', {page: name, violations: result.violations.length, passes: result.passes.length});
}

const browser = await chromium.launch({executablePath: '/usr/bin/chromium', headless: true});
// The page being driven, screenshot as `failure.png` when a check fails.
let current = null;
try {
  for (const [theme, viewport] of [['light', {width: 1280, height: 800}], ['dark', {width: 390, height: 844}]]) {
    const context = await browser.newContext({viewport, colorScheme: theme, timezoneId: 'UTC'});
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
    await accessibility(page, `sign-in (${theme})`);
    await page.getByLabel('Password').fill(process.env.STRATA_PASSWORD);
    await page.getByRole('button', {name: 'Sign in'}).click();
    await page.getByRole('heading', {name: 'Datasets'}).waitFor();
    passed('signed in', {theme});

    const cookies = await context.cookies();
    const session = cookies.find((c) => c.name === 'strata_session');
    assert.ok(session && session.httpOnly && session.sameSite === 'Strict', 'an HttpOnly, SameSite=Strict cookie');

    // Datasets: the dataset the user reads, with its count.
    const row = page.getByRole('row').filter({hasText: 'logs'});
    await row.waitFor();
    assert.match(await row.innerText(), /logs\s+3\b/);
    await page.screenshot({path: join(shots, `datasets-${theme}.png`), fullPage: true});
    await accessibility(page, `datasets (${theme})`);
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
    // Sorted by a column: ascending, then descending, then ascending again.
    const byHost = page.locator('table.results th button.sort').first();
    const order = async () => (await page.locator('table.results tbody tr').allInnerTexts()).map((c) => c.split('\t')[0]);
    await byHost.click();
    await page.locator('table.results th[aria-sort="ascending"]').waitFor();
    assert.deepEqual(await order(), ['a', 'b']);
    await byHost.click();
    await page.locator('table.results th[aria-sort="descending"]').waitFor();
    assert.deepEqual(await order(), ['b', 'a']);
    await byHost.click();
    await page.locator('table.results th[aria-sort="ascending"]').waitFor();
    assert.deepEqual(await order(), ['a', 'b']);
    passed('sort', {theme});
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
    await accessibility(page, `query, SQL rows (${theme})`);

    // The time range: `$__timeFilter` in SQL, a time field in a search.
    await page.getByRole('textbox', {name: /^Query/}).fill('SELECT COUNT(*) AS n FROM logs WHERE $__timeFilter("@timestamp")');
    await page.getByRole('combobox', {name: /^Time range/}).selectOption('15m');
    await page.getByRole('button', {name: 'Run'}).click();
    await page.getByRole('status').filter({hasText: '1 rows'}).waitFor();
    assert.equal(await page.locator('table.results tbody td').innerText(), '0', 'no record in the last 15 minutes');
    await page.getByRole('combobox', {name: /^Time range/}).selectOption('absolute');
    await page.getByLabel('From').fill('2026-11-01T09:00');
    await page.getByLabel('To').fill('2026-11-01T11:00');
    await page.getByRole('button', {name: 'Run'}).click();
    await page.locator('table.results tbody td').filter({hasText: '3'}).waitFor();
    await page.getByLabel('Language').selectOption('querydsl');
    await page.getByLabel('Dataset', {exact: true}).fill('logs');
    await page.getByLabel('Time field', {exact: true}).fill('@timestamp');
    await page.getByRole('textbox', {name: /^Query/}).fill('{"query": {"term": {"host": "a"}}}');
    await page.getByRole('button', {name: 'Run'}).click();
    await page.getByRole('status').filter({hasText: '2 rows'}).waitFor();
    await page.getByLabel('To').fill('2026-11-01T09:30');
    await page.getByRole('button', {name: 'Run'}).click();
    await page.getByRole('status').filter({hasText: '0 rows'}).waitFor();
    passed('time range', {theme});
    await page.getByRole('combobox', {name: /^Time range/}).selectOption('1h');
    await page.getByLabel('Dataset', {exact: true}).fill('');

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
    await accessibility(page, `query (${theme})`);

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
    await accessibility(page, `chat (${theme})`);

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
  }

  // Govern, as the root user: a role that masks `host`, a user holding it; signed in as that
  // user, the console shows `host` masked.
  const context = await browser.newContext({viewport: {width: 1280, height: 800}, timezoneId: 'UTC'});
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

  // Monitors, as the root user: one written with the form (a schedule, an SQL query, a trigger
  // and an action to the channel `ops`), test-run (its next runs, its condition, its rendered
  // subject), created, executed as a dry run, then for real (the webhook gets it); then edited.
  await page.getByRole('link', {name: 'Monitors'}).click();
  const channels = page.getByRole('region', {name: 'Channels'});
  await channels.getByRole('row').filter({hasText: 'ops'}).waitFor();
  const newChannel = page.getByRole('form', {name: 'New channel'});
  await newChannel.getByLabel('Channel type').selectOption('slack');
  await newChannel.getByLabel('Channel name').fill('chat room');
  await newChannel.getByLabel('Incoming webhook URL').fill('http://127.0.0.1:9/slack');
  await newChannel.getByRole('button', {name: 'Create channel'}).click();
  await channels.getByRole('row').filter({hasText: 'chat room'}).waitFor();
  page.once('dialog', (dialog) => dialog.accept());
  await channels.getByRole('button', {name: 'Delete chat room'}).click();
  await channels.getByRole('row').filter({hasText: 'chat room'}).waitFor({state: 'detached'});
  passed('channels');
  const editor = page.getByRole('form', {name: 'New monitor'});
  await editor.getByLabel('Monitor name').fill('hosts a');
  await editor.getByLabel('Interval').fill('1');
  await editor.getByRole('combobox', {name: /^Unit/}).selectOption('DAYS');
  await editor.getByLabel('Statement').fill("SELECT COUNT(*) FROM logs WHERE host = 'a'");
  await editor.getByRole('button', {name: 'Add a trigger'}).click();
  await editor.getByLabel('Trigger name').fill('two or more');
  await editor.getByLabel('Condition').selectOption('field_greater_than');
  await editor.getByLabel(/^Path/).fill('/rows/0/0');
  await editor.getByLabel('Value', {exact: true}).fill('1');
  await editor.getByRole('button', {name: 'Add an action to two or more'}).click();
  await editor.getByLabel('Action name').fill('tell ops');
  await editor.getByLabel('Channel').selectOption('ops');
  await editor.getByLabel('Subject template').fill('{{monitor.name}}: {{ctx.results.0.rows.0.0}} records');
  await editor.getByRole('button', {name: 'Test (not saved)'}).click();
  const tested = editor.getByRole('status');
  await tested.filter({hasText: 'triggered: two or more'}).waitFor();
  assert.equal(await tested.locator('time').count(), 5, 'the next five run times');
  assert.match(await tested.innerText(), /Query: 1 rows/);
  assert.match(await tested.innerText(), /Trigger two or more: condition holds/);
  assert.equal(await tested.locator('.action .subject strong').innerText(), 'hosts a: 2 records');
  assert.match(await tested.locator('.action pre').innerText(), /^Monitor hosts a fired at /);
  assert.equal(await page.getByText('No monitors yet.').count(), 1, 'a test run saves nothing');
  await editor.getByRole('tab', {name: 'JSON'}).click();
  const written = JSON.parse(await editor.getByLabel(/^Monitor document/).inputValue());
  assert.deepEqual(written.schedule, {period: {interval: 1, unit: 'DAYS'}});
  assert.deepEqual(written.triggers[0].condition, {type: 'field_greater_than', path: '/rows/0/0', value: 1});
  assert.equal(written.triggers[0].actions[0].destination_id, 'ops');
  await editor.getByRole('tab', {name: 'Form'}).click();
  await editor.getByRole('button', {name: 'Create monitor'}).click();
  await page.getByRole('heading', {name: 'hosts a'}).waitFor();
  await page.getByRole('button', {name: 'Execute as a dry run'}).click();
  await page.getByRole('status').filter({hasText: 'triggered: two or more'}).waitFor();
  await page.getByText('No runs yet.').waitFor();
  await page.getByRole('button', {name: 'Execute', exact: true}).click();
  await page.getByRole('row').filter({hasText: 'executed'}).filter({hasText: 'triggered: two or more'}).waitFor();
  passed('monitor executed');
  await page.screenshot({path: join(shots, 'monitors-light.png'), fullPage: true});
  await accessibility(page, 'monitors (light)');
  await page.getByRole('button', {name: 'Edit', exact: true}).click();
  const edit = page.getByRole('form', {name: 'Edit monitor hosts a'});
  await edit.getByLabel('Value', {exact: true}).fill('5');
  await edit.getByRole('button', {name: 'Test (not saved)'}).click();
  await edit.getByRole('status').filter({hasText: 'no trigger fired'}).waitFor();
  await edit.getByRole('button', {name: 'Save changes'}).click();
  await page.getByText(/version 2;/).waitFor();
  await page.getByRole('button', {name: 'Execute as a dry run'}).click();
  await page.getByRole('status').filter({hasText: 'no trigger fired'}).waitFor();
  passed('monitor edited');

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
  // An import of the table into a dataset, its job followed to its end.
  const importing = page.getByRole('form', {name: 'Import from pg'});
  await importing.getByLabel('Source', {exact: true}).fill('items');
  await importing.getByLabel('Into dataset').fill('stock');
  await importing.getByRole('button', {name: 'Start import'}).click();
  const job = page.getByRole('region', {name: 'Import jobs'}).getByRole('row').filter({hasText: 'stock'});
  await job.filter({hasText: 'succeeded'}).waitFor();
  assert.match(await job.innerText(), /pg: items\s+stock\s+succeeded\s+2\b/);
  passed('import');
  await page.screenshot({path: join(shots, 'connections-light.png'), fullPage: true});
  await accessibility(page, 'connections (light)');

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
  await accessibility(page, 'govern (light)');
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
} catch (error) {
  if (current) await current.screenshot({path: join(shots, 'failure.png'), fullPage: true}).catch(() => {});
  throw error;
} finally {
  await browser.close();
}
