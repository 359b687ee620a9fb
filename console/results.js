// A result as a table: paged, sortable by a column; and its export to CSV or NDJSON.

import {html, useMemo, useState} from './vendor/preact-htm.js';

const PAGE = 100;

function cell(value) {
  if (value === null || value === undefined) return '';
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

// One collator for every comparison: `localeCompare` with options builds one per call, which
// made sorting 10,000 rows take seconds (benches/console.rs).
const collator = new Intl.Collator(undefined, {numeric: true});

function compare(a, b) {
  if (a === b) return 0;
  if (a === null || a === undefined) return 1;
  if (b === null || b === undefined) return -1;
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  return collator.compare(cell(a), cell(b));
}

/** A table of `columns` (names) and `rows` (arrays), `PAGE` rows a page. */
export function ResultTable({columns, rows}) {
  const [sort, setSort] = useState(null);
  const [page, setPage] = useState(0);
  const sorted = useMemo(() => {
    if (!sort) return rows;
    const copy = rows.slice();
    copy.sort((x, y) => compare(x[sort.column], y[sort.column]) * (sort.ascending ? 1 : -1));
    return copy;
  }, [rows, sort]);
  const pages = Math.max(1, Math.ceil(sorted.length / PAGE));
  const shown = sorted.slice(page * PAGE, page * PAGE + PAGE);
  const by = (i) => {
    setSort(sort && sort.column === i ? {column: i, ascending: !sort.ascending} : {column: i, ascending: true});
    setPage(0);
  };
  const order = (i) => (sort && sort.column === i ? (sort.ascending ? 'ascending' : 'descending') : 'none');
  return html`
    <div class="table-box">
      <table class="results">
        <caption class="visually-hidden">Result, ${rows.length} rows</caption>
        <thead><tr>${columns.map((c, i) => html`
          <th scope="col" aria-sort=${order(i)}><button type="button" class="sort" onClick=${() => by(i)}>${c}</button></th>`)}</tr></thead>
        <tbody>${shown.map((r, n) => html`<tr key=${page * PAGE + n}>${r.map((v) => html`<td>${cell(v)}</td>`)}</tr>`)}</tbody>
      </table>
    </div>
    ${pages > 1 && html`
      <nav class="pager" aria-label="Result pages">
        <button type="button" disabled=${page === 0} onClick=${() => setPage(page - 1)}>Previous</button>
        <span>Page ${page + 1} of ${pages} (${rows.length.toLocaleString()} rows)</span>
        <button type="button" disabled=${page + 1 >= pages} onClick=${() => setPage(page + 1)}>Next</button>
      </nav>`}`;
}

function csvField(value) {
  const text = cell(value);
  return /[",\n\r]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** Downloads the rows as `format` (csv or ndjson). */
export function download(columns, rows, format) {
  const text = format === 'csv'
    ? [columns, ...rows].map((r) => r.map(csvField).join(',')).join('\r\n') + '\r\n'
    : rows.map((r) => JSON.stringify(Object.fromEntries(columns.map((c, i) => [c, r[i]])))).join('\n') + '\n';
  const type = format === 'csv' ? 'text/csv' : 'application/x-ndjson';
  const link = document.createElement('a');
  link.href = URL.createObjectURL(new Blob([text], {type}));
  link.download = `result.${format}`;
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 1000);
}
