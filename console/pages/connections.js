// Connections: the catalogue of source types with a search; a connection made with a form of
// its type's keys (secrets as password fields), tested, queried in place with SQL, and imported
// from (a table, a query's result, or a topic, stream, queue or key pattern) into a dataset; the
// account's import jobs with their progress, refreshed while one runs, cancelled from here.

import {html, useEffect, useState} from '../vendor/preact-htm.js';
import {api} from '../api.js';
import {ResultTable} from '../results.js';

const NUMBERS = new Set(['port', 'timeout_ms', 'batch_size', 'max_records']);
const FLAGS = new Set(['ssl', 'ssl_verify', 'tls']);

function Create({type, onMade}) {
  const [error, setError] = useState(null);
  async function submit(event) {
    event.preventDefault();
    const form = new FormData(event.target);
    const config = {};
    for (const key of type.config_keys) {
      const raw = form.get(key);
      if (FLAGS.has(key)) {
        if (raw) config[key] = true;
      } else if (raw !== null && raw !== '') {
        config[key] = NUMBERS.has(key) && /^\d+$/.test(raw) ? Number(raw) : raw;
      }
    }
    setError(null);
    try {
      const made = await api('POST', `/source/${encodeURIComponent(type.id)}`, {connector_id: type.id, name: form.get('name'), config});
      onMade(made);
    } catch (e) {
      setError(e.message);
    }
  }
  return html`
    <form class="grid-form" onSubmit=${submit} aria-labelledby="create-title">
      <h3 id="create-title">Connect ${type.name}</h3>
      <label>Connection name <input name="name" required pattern="[A-Za-z0-9_.-]{1,64}" /></label>
      ${type.config_keys.map((key) => FLAGS.has(key)
        ? html`<label class="inline" key=${key}><input type="checkbox" name=${key} /> ${key}</label>`
        : html`<label key=${key}>${key}
            <input name=${key} type=${(type.secret_keys || []).includes(key) ? 'password' : NUMBERS.has(key) ? 'number' : 'text'}
              autocomplete="off" /></label>`)}
      <button type="submit">Create connection</button>
      ${error && html`<p class="error" role="alert">${error}</p>`}
    </form>`;
}

/** The ways a source of each family is read: `source`'s key, and its label. */
const SOURCES = {
  table: 'Table or dataset', query: 'Query (SQL)', topic: 'Topic', stream: 'Stream', queue: 'Queue', key_pattern: 'Key pattern',
};

function Import({connection, onStarted}) {
  const [kind, setKind] = useState('table');
  const [source, setSource] = useState('');
  const [dataset, setDataset] = useState('');
  const [mode, setMode] = useState('append');
  const [follow, setFollow] = useState(false);
  const [error, setError] = useState(null);
  async function submit(event) {
    event.preventDefault();
    setError(null);
    const body = {connection_id: connection.connection_id, source: {[kind]: source}, dataset, mode};
    if (follow) body.follow = true;
    try {
      onStarted(await api('PUT', `/import/${encodeURIComponent(connection.connector_id)}`, body));
    } catch (e) {
      setError(e.message);
    }
  }
  return html`
    <form class="grid-form" onSubmit=${submit} aria-label=${`Import from ${connection.name}`}>
      <h3>Import into a dataset</h3>
      <div class="row">
        <label>Read
          <select value=${kind} onChange=${(e) => setKind(e.target.value)}>
            ${Object.entries(SOURCES).map(([k, l]) => html`<option value=${k}>${l}</option>`)}
          </select>
        </label>
        <label>Source <input value=${source} onInput=${(e) => setSource(e.target.value)} required /></label>
      </div>
      <div class="row">
        <label>Into dataset <input value=${dataset} onInput=${(e) => setDataset(e.target.value)} required /></label>
        <label>Mode
          <select value=${mode} onChange=${(e) => setMode(e.target.value)}>
            <option value="append">append</option>
            <option value="replace">replace its records</option>
          </select>
        </label>
        <label class="inline"><input type="checkbox" checked=${follow} onChange=${(e) => setFollow(e.target.checked)} /> Keep following</label>
      </div>
      <button type="submit">Start import</button>
      ${error && html`<p class="error" role="alert">${error}</p>`}
    </form>`;
}

function Connection({connection, onChanged, onImport}) {
  const [tested, setTested] = useState(null);
  const [statement, setStatement] = useState('SHOW TABLES');
  const [result, setResult] = useState(null);
  const [error, setError] = useState(null);
  const id = encodeURIComponent(connection.connection_id);
  async function test() {
    setError(null);
    try {
      setTested(await api('POST', `/source/${id}/test`));
      onChanged();
    } catch (e) {
      setError(e.message);
    }
  }
  async function query(event) {
    event.preventDefault();
    setError(null);
    try {
      const answer = await api('POST', `/sql?connection_id=${id}`, {query: statement});
      setResult({columns: answer.columns.map((c) => c.name), rows: answer.rows});
    } catch (e) {
      setResult(null);
      setError(e.message);
    }
  }
  return html`
    <section aria-labelledby="connection-title">
      <h2 id="connection-title">${connection.name}</h2>
      <p class="hint">${connection.connector_id}; ${connection.status}${connection.message ? `: ${connection.message}` : ''}</p>
      <div class="row"><button type="button" onClick=${test}>Test connection</button>
        ${tested && html`<span role="status">${tested.status}${tested.datasets_available !== undefined ? `, ${tested.datasets_available} datasets` : ''}</span>`}</div>
      <form onSubmit=${query}>
        <label class="editor">SQL in place
          <textarea rows="3" spellcheck=${false} value=${statement} onInput=${(e) => setStatement(e.target.value)}></textarea>
        </label>
        <button type="submit">Run in place</button>
      </form>
      ${error && html`<p class="error" role="alert">${error}</p>`}
      ${result && html`<${ResultTable} columns=${result.columns} rows=${result.rows} />`}
      <${Import} connection=${connection} onStarted=${onImport} />
    </section>`;
}

const LIVE = new Set(['queued', 'running']);

/** The import jobs, refreshed every second while one is queued or runs (and when `started`
 * changes), each with its connection's name; a live one can be cancelled. */
function Imports({started, connections}) {
  const named = (id) => (connections.find((c) => c.connection_id === id) || {name: id}).name;
  const [jobs, setJobs] = useState([]);
  const [error, setError] = useState(null);
  const [refresh, setRefresh] = useState(0);
  useEffect(() => {
    let stopped = false;
    let timer = null;
    const load = async () => {
      const answer = await api('GET', '/import/jobs').catch(() => ({jobs: []}));
      if (stopped) return;
      setJobs(answer.jobs);
      if (answer.jobs.some((j) => LIVE.has(j.state))) timer = setTimeout(load, 1000);
    };
    load();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [started, refresh]);
  async function cancel(job) {
    setError(null);
    try {
      await api('DELETE', `/import/jobs/${encodeURIComponent(job.job_id)}`);
      setRefresh((n) => n + 1);
    } catch (e) {
      setError(e.message);
    }
  }
  if (jobs.length === 0) return null;
  return html`
    <section aria-labelledby="imports-title">
      <h2 id="imports-title">Import jobs</h2>
      ${error && html`<p class="error" role="alert">${error}</p>`}
      <div class="table-box"><table>
        <thead><tr><th scope="col">Job</th><th scope="col">From</th><th scope="col">Into</th><th scope="col">State</th>
          <th scope="col" class="number">Records</th><th scope="col" class="number">Per second</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
        <tbody>${jobs.map((j) => html`<tr key=${j.job_id}>
          <td>${j.job_id}</td>
          <td>${named(j.connection_id)}: ${Object.values(j.source || {}).join(' ')}</td>
          <td>${j.dataset}</td>
          <td>${j.state}${LIVE.has(j.state) ? html` <progress aria-label=${`Import ${j.job_id} in progress`}></progress>` : ''}${j.error ? html`<span class="error">: ${j.error}</span>` : ''}</td>
          <td class="number">${j.records_written.toLocaleString()}</td>
          <td class="number">${j.rate ? Math.round(j.rate).toLocaleString() : ''}</td>
          <td>${LIVE.has(j.state) && html`<button type="button" onClick=${() => cancel(j)}>Cancel ${j.job_id}</button>`}</td>
        </tr>`)}</tbody></table></div>
    </section>`;
}

export function Connections() {
  const [catalogue, setCatalogue] = useState([]);
  const [search, setSearch] = useState('');
  const [type, setType] = useState(null);
  const [connections, setConnections] = useState([]);
  const [chosen, setChosen] = useState(null);
  const [error, setError] = useState(null);
  const [started, setStarted] = useState(null);
  const load = () => api('GET', '/sources/connections').then(setConnections).catch((e) => setError(e.message));
  useEffect(() => {
    api('GET', '/sources').then(setCatalogue).catch((e) => setError(e.message));
    load();
  }, []);
  // The chosen connection as last listed (its status changes when it is tested).
  const current = chosen && (connections.find((c) => c.connection_id === chosen.connection_id) || chosen);
  const words = search.toLowerCase().split(/\s+/).filter(Boolean);
  const found = catalogue.filter((t) => words.every((w) => `${t.name} ${t.category} ${t.description}`.toLowerCase().includes(w)));
  return html`
    ${error && html`<p class="error" role="alert">${error}</p>`}
    ${connections.length > 0 && html`
      <table>
        <caption class="visually-hidden">Your connections</caption>
        <thead><tr><th scope="col">Connection</th><th scope="col">Type</th><th scope="col">Status</th></tr></thead>
        <tbody>${connections.map((c) => html`
          <tr key=${c.connection_id}><td><button type="button" class="link" onClick=${() => setChosen(c)}>${c.name}</button></td>
            <td>${c.connector_id}</td><td>${c.status}</td></tr>`)}</tbody>
      </table>`}
    ${current && html`<${Connection} key=${current.connection_id} connection=${current} onChanged=${load}
      onImport=${(job) => setStarted(job.job_id)} />`}
    <${Imports} started=${started} connections=${connections} />
    <section aria-labelledby="catalogue-title">
      <h2 id="catalogue-title">Connect a source</h2>
      <label>Search the ${catalogue.length} source types <input type="search" value=${search} onInput=${(e) => setSearch(e.target.value)} /></label>
      <ul class="catalogue">${found.slice(0, 24).map((t) => html`
        <li key=${t.id}><button type="button" class="link" onClick=${() => setType(t)}>${t.name}</button>
          <span class="hint">${t.category}; ${t.capabilities.join(', ')}</span></li>`)}</ul>
      ${type && html`<${Create} key=${type.id} type=${type} onMade=${async (made) => {
        setType(null);
        await load();
        setChosen(made);
      }} />`}
    </section>`;
}
