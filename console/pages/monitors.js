// Monitors: the ones the user may read, with their schedule and last run; one written as its
// document (JSON, as the API takes it), test-run before it is saved (its triggers, rendered
// actions and next run times), then created; executed as a dry run (actions rendered, nothing
// sent or recorded) or for real; its run history.

import {html, useEffect, useState} from '../vendor/preact-htm.js';
import {api} from '../api.js';

const EXAMPLE = {
  name: 'errors in logs',
  enabled: true,
  schedule: {period: {interval: 5, unit: 'MINUTES'}},
  query: {type: 'sql', statement: "SELECT COUNT(*) AS errors FROM logs WHERE level = 'error'"},
  triggers: [{name: 'any error', severity: 1, condition: {type: 'field_greater_than', path: '/rows/0/0', value: 0}, actions: []}],
};

function scheduleText(schedule) {
  if (!schedule) return '';
  if (schedule.period) return `every ${schedule.period.interval} ${String(schedule.period.unit).toLowerCase()}`;
  if (schedule.cron) return `cron ${schedule.cron.expression}${schedule.cron.timezone ? ` (${schedule.cron.timezone})` : ''}`;
  return JSON.stringify(schedule);
}

/** What a run says in a few words: its error, or which triggers fired. */
function outcome(run) {
  if (!run) return 'never run';
  if (run.error) return `error: ${run.error}`;
  const triggers = Object.values(run.trigger_results || {});
  const fired = triggers.filter((t) => t.triggered).map((t) => t.name);
  const failed = triggers.filter((t) => t.error).map((t) => `${t.name}: ${t.error}`);
  if (failed.length) return `trigger error (${failed.join('; ')})`;
  return fired.length ? `triggered: ${fired.join(', ')}` : 'no trigger fired';
}

function Execution({result}) {
  if (!result) return null;
  return html`
    <div class="execution" role="status">
      <p><strong>${result.monitor_name}</strong>: ${outcome(result)}</p>
      ${result.next_runs && html`
        <p>Next runs: ${result.next_runs.map((t, i) => html`${i > 0 ? ', ' : ''}<time datetime=${t}>${new Date(t).toLocaleString()}</time>`)}</p>`}
      ${Object.values(result.trigger_results || {}).flatMap((t) => Object.values(t.action_results || {}).map((a) => html`
        <div class="action" key=${a.id}>
          <p>Action ${a.name}${a.throttled ? ' (throttled)' : ''}${a.error ? `: ${a.error}` : ''}</p>
          ${a.output && html`<pre class="json">${a.output.subject}\n\n${a.output.message}</pre>`}
        </div>`))}
      <details><summary>The whole result</summary><pre class="json">${JSON.stringify(result, null, 2)}</pre></details>
    </div>`;
}

function Monitor({monitor, onChanged}) {
  const [runs, setRuns] = useState(null);
  const [executed, setExecuted] = useState(null);
  const [error, setError] = useState(null);
  const id = encodeURIComponent(monitor._id);
  const loadRuns = () => api('GET', `/monitor/${id}/runs`).then((r) => setRuns(r.runs)).catch((e) => setError(e.message));
  useEffect(() => {
    loadRuns();
  }, [monitor._id]);
  async function execute(dryrun) {
    setError(null);
    try {
      setExecuted(await api('POST', `/monitor/${id}/execute`, {dryrun}));
      loadRuns();
      onChanged();
    } catch (e) {
      setError(e.message);
    }
  }
  return html`
    <section aria-labelledby="monitor-title">
      <h2 id="monitor-title">${monitor.monitor.name}</h2>
      <p class="hint">${scheduleText(monitor.monitor.schedule)}; version ${monitor._version}; ${monitor.monitor.enabled ? 'enabled' : 'disabled'}</p>
      <div class="row">
        <button type="button" onClick=${() => execute(true)}>Execute as a dry run</button>
        <button type="button" onClick=${() => execute(false)}>Execute</button>
      </div>
      ${error && html`<p class="error" role="alert">${error}</p>`}
      <${Execution} result=${executed} />
      <h3>Runs</h3>
      ${runs && (runs.length === 0 ? html`<p>No runs yet.</p>` : html`
        <table>
          <thead><tr><th scope="col">Started</th><th scope="col">Planned</th><th scope="col">Outcome</th></tr></thead>
          <tbody>${runs.map((r) => html`
            <tr key=${r.run_id}><td>${r.start_time}</td><td>${r.planned_time || 'executed'}</td><td>${outcome(r)}</td></tr>`)}</tbody>
        </table>`)}
    </section>`;
}

export function Monitors() {
  const [monitors, setMonitors] = useState(null);
  const [chosen, setChosen] = useState(null);
  const [last, setLast] = useState({});
  const [draft, setDraft] = useState(JSON.stringify(EXAMPLE, null, 2));
  const [error, setError] = useState(null);
  async function load() {
    try {
      const listed = await api('GET', '/monitors');
      setMonitors(listed.monitors);
      const newest = {};
      await Promise.all(listed.monitors.map(async (m) => {
        const runs = await api('GET', `/monitor/${encodeURIComponent(m._id)}/runs`).catch(() => null);
        newest[m._id] = runs && runs.runs[0];
      }));
      setLast(newest);
    } catch (e) {
      setError(e.message);
    }
  }
  useEffect(() => {
    load();
  }, []);
  const [tested, setTested] = useState(null);
  function parsed() {
    try {
      return JSON.parse(draft);
    } catch (e) {
      setError(`the monitor is not JSON: ${e.message}`);
      return null;
    }
  }
  async function create(event) {
    event.preventDefault();
    setError(null);
    const doc = parsed();
    if (!doc) return;
    try {
      const made = await api('POST', '/monitor', doc);
      setTested(null);
      await load();
      setChosen(made);
    } catch (e) {
      setError(e.message);
    }
  }
  // A test run of the document as it is, not saved: its query, triggers and rendered actions,
  // and the next five times its schedule would run it.
  async function test() {
    setError(null);
    const doc = parsed();
    if (!doc) return;
    try {
      setTested(await api('POST', '/monitor/_execute', doc));
    } catch (e) {
      setTested(null);
      setError(e.message);
    }
  }
  return html`
    ${monitors && (monitors.length === 0 ? html`<p>No monitors yet.</p>` : html`
      <table>
        <caption class="visually-hidden">Monitors you may read</caption>
        <thead><tr><th scope="col">Name</th><th scope="col">Schedule</th><th scope="col">Last run</th></tr></thead>
        <tbody>${monitors.map((m) => html`
          <tr key=${m._id}>
            <td><button type="button" class="link" onClick=${() => setChosen(m)}>${m.monitor.name}</button></td>
            <td>${scheduleText(m.monitor.schedule)}</td>
            <td>${last[m._id] ? `${last[m._id].start_time}: ${outcome(last[m._id])}` : 'never run'}</td>
          </tr>`)}</tbody>
      </table>`)}
    ${chosen && html`<${Monitor} key=${chosen._id} monitor=${chosen} onChanged=${load} />`}
    <form class="grid-form wide" onSubmit=${create}>
      <label>New monitor <span class="hint">(JSON: name, schedule, query, triggers; see the API's Monitors and channels)</span>
        <textarea rows="14" spellcheck=${false} value=${draft} onInput=${(e) => setDraft(e.target.value)}></textarea>
      </label>
      <div class="row">
        <button type="button" onClick=${test}>Test (not saved)</button>
        <button type="submit">Create monitor</button>
      </div>
      ${error && html`<p class="error" role="alert">${error}</p>`}
      <${Execution} result=${tested} />
    </form>`;
}
