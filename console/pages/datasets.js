// Datasets: the ones the user may see, with their record counts and sizes; one's mapping and
// a sample of its records; create, delete, and upload NDJSON or CSV with a progress bar.

import {html, useEffect, useState} from '../vendor/preact-htm.js';
import {api} from '../api.js';
import {ResultTable} from '../results.js';

/** Records per bulk request of an upload. */
const CHUNK = 500;

/** The rows of CSV text (RFC 4180: quoted fields, doubled quotes, CRLF or LF). */
export function parseCsv(text) {
  const rows = [];
  let row = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i += 1;
      } else if (c === '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c === '"') {
      quoted = true;
    } else if (c === ',') {
      row.push(field);
      field = '';
    } else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i += 1;
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
    } else {
      field += c;
    }
  }
  if (field !== '' || row.length > 0) {
    row.push(field);
    rows.push(row);
  }
  return rows.filter((r) => r.length > 1 || r[0] !== '');
}

/** A CSV cell as JSON: numbers and booleans as such, the rest as text. */
function value(text) {
  if (text === '') return null;
  if (/^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(text)) return Number(text);
  if (text === 'true' || text === 'false') return text === 'true';
  return text;
}

/** The records of an uploaded file: NDJSON lines, or CSV with a header line. */
export function recordsOf(name, text) {
  if (/\.csv$/i.test(name)) {
    const [header, ...rows] = parseCsv(text);
    return rows.map((r) => Object.fromEntries(header.map((h, i) => [h, value(r[i] ?? '')])));
  }
  return text.split(/\r?\n/).filter((l) => l.trim()).map((line, i) => {
    try {
      return JSON.parse(line);
    } catch (e) {
      throw new Error(`line ${i + 1} is not JSON: ${e.message}`);
    }
  });
}

function Upload({dataset, onDone}) {
  const [progress, setProgress] = useState(null);
  const [error, setError] = useState(null);
  async function upload(event) {
    event.preventDefault();
    const file = new FormData(event.target).get('file');
    if (!file || !file.name) return;
    setError(null);
    try {
      const records = recordsOf(file.name, await file.text());
      let written = 0;
      setProgress({written, total: records.length});
      for (let i = 0; i < records.length; i += CHUNK) {
        const chunk = records.slice(i, i + CHUNK);
        const body = chunk.map((r) => `{"index":{}}\n${JSON.stringify(r)}\n`).join('');
        const answer = await api('POST', `/${encodeURIComponent(dataset)}/_bulk`, body, 'application/x-ndjson');
        if (answer.errors) {
          const first = answer.items.find((item) => (item.index || {}).error);
          throw new Error(`a record was refused: ${JSON.stringify(first.index.error)}`);
        }
        written += chunk.length;
        setProgress({written, total: records.length});
      }
      event.target.reset();
      onDone();
    } catch (e) {
      setError(e.message);
    }
  }
  return html`
    <form class="row" onSubmit=${upload}>
      <label>Upload NDJSON or CSV into ${dataset} <input type="file" name="file" accept=".ndjson,.json,.jsonl,.csv" required /></label>
      <button type="submit">Upload</button>
      ${progress && html`
        <label>Uploaded <progress max=${progress.total} value=${progress.written}>${progress.written}</progress>
          <span role="status">${progress.written.toLocaleString()} of ${progress.total.toLocaleString()} records</span></label>`}
      ${error && html`<p class="error" role="alert">${error}</p>`}
    </form>`;
}

function Detail({name, onDeleted, onChanged}) {
  const [mapping, setMapping] = useState(null);
  const [sample, setSample] = useState(null);
  const [error, setError] = useState(null);
  const load = () => {
    api('GET', `/${encodeURIComponent(name)}/_mapping`)
      .then((m) => setMapping(Object.entries(((m[name] || {}).mappings || {}).properties || {})))
      .catch((e) => setError(e.message));
    api('POST', `/${encodeURIComponent(name)}/_search`, {size: 10, query: {match_all: {}}})
      .then((answer) => {
        const hits = answer.hits.hits;
        const fields = [...new Set(hits.flatMap((h) => Object.keys(h._source || {})))];
        setSample({columns: ['_id', ...fields], rows: hits.map((h) => [h._id, ...fields.map((f) => h._source[f])])});
      })
      .catch((e) => setError(e.message));
  };
  useEffect(load, [name]);
  async function remove() {
    if (!confirm(`Delete dataset ${name} and all its records?`)) return;
    try {
      await api('DELETE', `/${encodeURIComponent(name)}`);
      onDeleted();
    } catch (e) {
      setError(e.message);
    }
  }
  return html`
    <section aria-labelledby="dataset-title">
      <h2 id="dataset-title">${name}</h2>
      ${error && html`<p class="error" role="alert">${error}</p>`}
      <${Upload} dataset=${name} onDone=${() => { load(); onChanged(); }} />
      <h3>Mapping</h3>
      ${mapping && html`<table><thead><tr><th scope="col">Field</th><th scope="col">Type</th></tr></thead>
        <tbody>${mapping.map(([field, m]) => html`<tr key=${field}><td>${field}</td><td>${m.type || 'object'}</td></tr>`)}</tbody></table>`}
      <h3>Sample of records</h3>
      ${sample && (sample.rows.length ? html`<${ResultTable} columns=${sample.columns} rows=${sample.rows} />` : html`<p>No records yet.</p>`)}
      <p><button type="button" class="danger" onClick=${remove}>Delete ${name}</button></p>
    </section>`;
}

export function Datasets() {
  const [datasets, setDatasets] = useState(null);
  const [chosen, setChosen] = useState(null);
  const [error, setError] = useState(null);
  const load = () => api('GET', '/metadata')
    .then((list) => setDatasets(list.sort((a, b) => a.index.localeCompare(b.index))))
    .catch((e) => setError(e.message));
  useEffect(() => {
    load();
  }, []);
  async function create(event) {
    event.preventDefault();
    const name = new FormData(event.target).get('name');
    setError(null);
    try {
      await api('PUT', `/${encodeURIComponent(name)}`);
      event.target.reset();
      await load();
      setChosen(name);
    } catch (e) {
      setError(e.message);
    }
  }
  return html`
    ${error && html`<p class="error" role="alert">${error}</p>`}
    ${!datasets ? html`<p aria-busy="true">Loading…</p>` : datasets.length === 0 ? html`<p>No datasets yet.</p>` : html`
      <table>
        <caption class="visually-hidden">The datasets you may see</caption>
        <thead><tr><th scope="col">Name</th><th scope="col" class="number">Records</th><th scope="col" class="number">Size</th><th scope="col">Health</th></tr></thead>
        <tbody>
          ${datasets.map((d) => html`
            <tr key=${d.index}>
              <td><button type="button" class="link" onClick=${() => setChosen(d.index)}>${d.index}</button></td>
              <td class="number">${Number(d['docs.count']).toLocaleString()}</td>
              <td class="number">${d['store.size']}</td>
              <td>${d.health}</td>
            </tr>`)}
        </tbody>
      </table>`}
    <form class="row" onSubmit=${create}>
      <label>New dataset <input name="name" required pattern="[A-Za-z0-9][A-Za-z0-9._-]*" /></label>
      <button type="submit">Create dataset</button>
    </form>
    ${chosen && html`<${Detail} key=${chosen} name=${chosen} onChanged=${load}
      onDeleted=${() => { setChosen(null); load(); }} />`}`;
}
