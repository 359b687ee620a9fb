// Query: an editor for SQL, the Query DSL and PromQL, with history; results as a table (paged,
// sortable), as JSON and as a chart; a time range (PromQL's window; a filter on a time field of
// a search; `$__timeFilter(column)`, `$__from` and `$__to` in SQL, as Grafana writes them);
// export to CSV and NDJSON.

import {html, useState} from '../vendor/preact-htm.js';
import {api} from '../api.js';
import {Chart, chartOf} from '../chart.js';
import {ResultTable, download} from '../results.js';

const LANGUAGES = {
  sql: {label: 'SQL', example: 'SELECT * FROM logs LIMIT 10'},
  querydsl: {label: 'Query DSL', example: '{"query": {"match_all": {}}, "size": 10}'},
  promql: {label: 'PromQL', example: 'sum by (job) (rate(http_requests_total[5m]))'},
};

const RANGES = [
  ['15m', 'Last 15 minutes', 15 * 60],
  ['1h', 'Last hour', 3600],
  ['6h', 'Last 6 hours', 6 * 3600],
  ['24h', 'Last 24 hours', 24 * 3600],
  ['7d', 'Last 7 days', 7 * 24 * 3600],
  ['absolute', 'Between…', 0],
];

const HISTORY_KEY = 'strata.query.history';

function history() {
  try {
    return JSON.parse(localStorage.getItem(HISTORY_KEY)) || [];
  } catch {
    return [];
  }
}

function remember(entry) {
  const kept = [entry, ...history().filter((h) => h.text !== entry.text || h.language !== entry.language)].slice(0, 50);
  localStorage.setItem(HISTORY_KEY, JSON.stringify(kept));
  return kept;
}

/** The window a range picks: [start, end] in seconds. */
function window_(range, from, to) {
  if (range === 'absolute') return [Date.parse(from) / 1000, Date.parse(to) / 1000];
  const span = RANGES.find((r) => r[0] === range)[2];
  const end = Math.floor(Date.now() / 1000);
  return [end - span, end];
}

/** An instant of a window as an SQL timestamp literal (UTC). */
function sqlTime(seconds) {
  return `TIMESTAMP '${new Date(seconds * 1000).toISOString()}'`;
}

/** SQL with the window's macros replaced: `$__timeFilter(column)`, `$__from`, `$__to`. */
export function withTimeMacros(text, [start, end]) {
  return text
    .replace(/\$__timeFilter\(\s*([^()]+?)\s*\)/g, (_, column) => `(${column} >= ${sqlTime(start)} AND ${column} <= ${sqlTime(end)})`)
    .replaceAll('$__from', sqlTime(start))
    .replaceAll('$__to', sqlTime(end));
}

/** A search body filtered to the window on `field` (its query kept as a must clause). */
export function withTimeFilter(body, field, [start, end]) {
  const range = {range: {[field]: {gte: new Date(start * 1000).toISOString(), lte: new Date(end * 1000).toISOString()}}};
  return {...body, query: {bool: {must: [body.query || {match_all: {}}], filter: [range]}}};
}

function usesTimeMacros(text) {
  return /\$__(timeFilter\(|from\b|to\b)/.test(text);
}

/** A PromQL answer's rows: one per sample. */
function promRows(data) {
  const name = (m) => JSON.stringify(m);
  if (data.resultType === 'matrix') {
    return {columns: ['series', 'time', 'value'], rows: data.result.flatMap((s) => s.values.map((v) => [name(s.metric), new Date(v[0] * 1000).toISOString(), Number(v[1])]))};
  }
  if (data.resultType === 'vector') {
    return {columns: ['series', 'time', 'value'], rows: data.result.map((s) => [name(s.metric), new Date(s.value[0] * 1000).toISOString(), Number(s.value[1])])};
  }
  return {columns: ['time', 'value'], rows: [[new Date(data.result[0] * 1000).toISOString(), data.result[1]]]};
}

/** A search answer's rows: the first aggregation's buckets, or the hits' sources. */
function searchRows(answer) {
  const aggregations = Object.entries(answer.aggregations || {});
  if (aggregations.length > 0) {
    const [name, aggregation] = aggregations[0];
    const buckets = aggregation.buckets || [];
    const dated = buckets.length > 0 && buckets[0].key_as_string !== undefined && typeof buckets[0].key === 'number';
    const columns = [dated ? 'time' : name, 'count'];
    const rows = buckets.map((b) => [dated ? b.key_as_string : b.key, b.doc_count]);
    const chart = {columns: [{name: columns[0], type: dated ? 'date' : 'keyword'}, {name: 'count', type: 'long'}], rows};
    return {columns, rows, chart};
  }
  const hits = (answer.hits && answer.hits.hits) || [];
  const fields = [...new Set(hits.flatMap((h) => Object.keys(h._source || {})))];
  return {columns: ['_id', ...fields], rows: hits.map((h) => [h._id, ...fields.map((f) => (h._source || {})[f])])};
}

async function run(language, text, index, range, from, to, timeField) {
  if (language === 'sql') {
    const query = usesTimeMacros(text) ? withTimeMacros(text, window_(range, from, to)) : text;
    const answer = await api('POST', '/sql', {query});
    return {json: answer, columns: answer.columns.map((c) => c.name), rows: answer.rows, chart: chartOf(answer)};
  }
  if (language === 'querydsl') {
    let body;
    try {
      body = JSON.parse(text || '{}');
    } catch (e) {
      throw new Error(`the query is not JSON: ${e.message}`);
    }
    if (timeField.trim()) body = withTimeFilter(body, timeField.trim(), window_(range, from, to));
    const answer = await api('POST', `/${encodeURIComponent(index || '_all')}/_search`.replace('/_all/', '/'), body);
    const table = searchRows(answer);
    return {json: answer, columns: table.columns, rows: table.rows, chart: table.chart ? chartOf(table.chart) : null};
  }
  const [start, end] = window_(range, from, to);
  const step = Math.max(1, Math.round((end - start) / 240));
  const params = new URLSearchParams({query: text, start: String(start), end: String(end), step: String(step)});
  if (index) params.set('index', index);
  const answer = await api('GET', `/promql/query_range?${params}`);
  const table = promRows(answer.data);
  return {json: answer, columns: table.columns, rows: table.rows, chart: chartOf(answer.data)};
}

export function Query() {
  const [language, setLanguage] = useState('sql');
  const [text, setText] = useState(LANGUAGES.sql.example);
  const [index, setIndex] = useState('');
  const [range, setRange] = useState('1h');
  const [from, setFrom] = useState('');
  const [to, setTo] = useState('');
  const [timeField, setTimeField] = useState('');
  const [view, setView] = useState('table');
  const [result, setResult] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [past, setPast] = useState(history());

  async function submit(event) {
    if (event) event.preventDefault();
    setBusy(true);
    setError(null);
    const started = performance.now();
    try {
      const answer = await run(language, text, index, range, from, to, timeField);
      answer.millis = Math.round(performance.now() - started);
      setResult(answer);
      setView(answer.chart && language === 'promql' ? 'chart' : 'table');
      setPast(remember({language, text, index}));
    } catch (e) {
      setResult(null);
      setError(e.message);
    } finally {
      setBusy(false);
    }
  }
  function keys(event) {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) submit(event);
  }
  function choose(next) {
    if (text === LANGUAGES[language].example || !text.trim()) setText(LANGUAGES[next].example);
    setLanguage(next);
  }
  const views = [['table', 'Table'], ['json', 'JSON'], ['chart', 'Chart']];
  return html`
    <form class="query" onSubmit=${submit}>
      <div class="row">
        <label>Language
          <select value=${language} onChange=${(e) => choose(e.target.value)}>
            ${Object.entries(LANGUAGES).map(([k, l]) => html`<option value=${k}>${l.label}</option>`)}
          </select>
        </label>
        ${language !== 'sql' && html`
          <label>${language === 'promql' ? 'Metrics dataset (optional)' : 'Dataset'}
            <input value=${index} onInput=${(e) => setIndex(e.target.value)} placeholder=${language === 'promql' ? 'every one' : 'logs'} />
          </label>`}
        ${language === 'querydsl' && html`
          <label>Time field <input value=${timeField} onInput=${(e) => setTimeField(e.target.value)} placeholder="none" /></label>`}
        <label>Time range
          <select value=${range} onChange=${(e) => setRange(e.target.value)}>
            ${RANGES.map(([k, l]) => html`<option value=${k}>${l}</option>`)}
          </select>
        </label>
        ${range === 'absolute' && html`
          <label>From <input type="datetime-local" value=${from} onInput=${(e) => setFrom(e.target.value)} required /></label>
          <label>To <input type="datetime-local" value=${to} onInput=${(e) => setTo(e.target.value)} required /></label>`}
      </div>
      <label class="editor">Query <span class="hint">(Ctrl+Enter runs it${language === 'sql' ? '; $__timeFilter(column) keeps the time range' : language === 'querydsl' ? '; a time field keeps the time range' : ''})</span>
        <textarea rows="6" spellcheck=${false} value=${text} onInput=${(e) => setText(e.target.value)} onKeyDown=${keys}></textarea>
      </label>
      <div class="row">
        <button type="submit" disabled=${busy}>Run</button>
        ${result && html`<span class="hint" role="status">${result.rows.length.toLocaleString()} rows in ${result.millis} ms</span>`}
      </div>
    </form>
    ${error && html`<p class="error" role="alert">${error}</p>`}
    ${result && html`
      <section class="result" aria-label="Result">
        <div class="row">
          <div role="tablist" aria-label="Result view">
            ${views.map(([k, l]) => html`
              <button type="button" role="tab" aria-selected=${view === k} onClick=${() => setView(k)}>${l}</button>`)}
          </div>
          <button type="button" onClick=${() => download(result.columns, result.rows, 'csv')}>Export CSV</button>
          <button type="button" onClick=${() => download(result.columns, result.rows, 'ndjson')}>Export NDJSON</button>
        </div>
        <div role="tabpanel">
          ${view === 'table' && html`<${ResultTable} columns=${result.columns} rows=${result.rows} />`}
          ${view === 'json' && html`<pre class="json">${JSON.stringify(result.json, null, 2)}</pre>`}
          ${view === 'chart' && html`<${Chart} chart=${result.chart} />`}
        </div>
      </section>`}
    ${past.length > 0 && html`
      <details class="history">
        <summary>History (${past.length})</summary>
        <ul>${past.map((h) => html`
          <li><button type="button" class="link" onClick=${() => { setLanguage(h.language); setText(h.text); setIndex(h.index || ''); }}>
            <span class="tag">${LANGUAGES[h.language] ? LANGUAGES[h.language].label : h.language}</span> ${h.text}
          </button></li>`)}</ul>
      </details>`}`;
}
