// Datasets: the ones the user may see, with their record counts and sizes.

import {html, useEffect, useState} from '../vendor/preact-htm.js';
import {api} from '../api.js';

export function Datasets() {
  const [datasets, setDatasets] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    api('GET', '/metadata')
      .then((list) => setDatasets(list.sort((a, b) => a.index.localeCompare(b.index))))
      .catch((e) => setError(e.message));
  }, []);
  if (error) return html`<p class="error" role="alert">${error}</p>`;
  if (!datasets) return html`<p aria-busy="true">Loading…</p>`;
  if (datasets.length === 0) return html`<p>No datasets yet.</p>`;
  return html`
    <table>
      <caption class="visually-hidden">The datasets you may see</caption>
      <thead><tr><th scope="col">Name</th><th scope="col" class="number">Records</th><th scope="col" class="number">Size</th><th scope="col">Health</th></tr></thead>
      <tbody>
        ${datasets.map((d) => html`
          <tr key=${d.index}>
            <td>${d.index}</td>
            <td class="number">${Number(d['docs.count']).toLocaleString()}</td>
            <td class="number">${d['store.size']}</td>
            <td>${d.health}</td>
          </tr>`)}
      </tbody>
    </table>`;
}
