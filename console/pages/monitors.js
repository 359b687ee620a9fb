// Monitors: the ones the user may read, with their schedule and last run; one written with the
// editor (a form, or its JSON document), test-run before it is saved (its next run times,
// triggers and rendered actions), then created, or a saved one edited; executed as a dry run
// (actions rendered, nothing sent or recorded) or for real; its run history.

import {html, useEffect, useState} from '../vendor/preact-htm.js';
import {api} from '../api.js';
import {EXAMPLE, Execution, MonitorEditor, documentOf, outcome} from './monitor-editor.js';

function scheduleText(schedule) {
  if (!schedule) return '';
  if (schedule.period) return `every ${schedule.period.interval} ${String(schedule.period.unit).toLowerCase()}`;
  if (schedule.cron) return `cron ${schedule.cron.expression}${schedule.cron.timezone ? ` (${schedule.cron.timezone})` : ''}`;
  return JSON.stringify(schedule);
}

function Monitor({monitor, channels, onChanged}) {
  const [editing, setEditing] = useState(false);
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
        <button type="button" onClick=${() => setEditing(true)} disabled=${editing}>Edit</button>
      </div>
      ${editing && html`<${MonitorEditor} initial=${documentOf(monitor.monitor)} id=${monitor._id} channels=${channels}
        onSaved=${(saved) => { setEditing(false); onChanged(saved); }} onCancel=${() => setEditing(false)} />`}
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

const CHANNEL_TYPES = {webhook: 'Webhook', slack: 'Slack', email: 'Email'};

/** The notification channels: listed with how their alerts went, made with a form, deleted. */
function Channels({channels, onChanged}) {
  const [type, setType] = useState('webhook');
  const [error, setError] = useState(null);
  async function create(event) {
    event.preventDefault();
    const form = new FormData(event.target);
    const block = type === 'email'
      ? {smtp_account_id: form.get('smtp'), recipients: String(form.get('recipients')).split(',').map((r) => r.trim()).filter(Boolean)}
      : {url: form.get('url')};
    const config = {name: form.get('name'), channel_type: type, [type]: block};
    setError(null);
    try {
      await api('POST', '/alert', {channel_id: form.get('id') || undefined, config});
      event.target.reset();
      onChanged();
    } catch (e) {
      setError(e.message);
    }
  }
  async function remove(channel) {
    if (!confirm(`Delete the channel ${channel.config.name}?`)) return;
    setError(null);
    try {
      await api('DELETE', `/alert/${encodeURIComponent(channel.channel_id)}`);
      onChanged();
    } catch (e) {
      setError(e.message);
    }
  }
  return html`
    <section aria-labelledby="channels-title">
      <h2 id="channels-title">Channels</h2>
      ${error && html`<p class="error" role="alert">${error}</p>`}
      ${channels.length === 0 ? html`<p>No channels yet.</p>` : html`
        <table>
          <thead><tr><th scope="col">Channel</th><th scope="col">Type</th><th scope="col">Delivery</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
          <tbody>${channels.map((c) => html`
            <tr key=${c.channel_id}><td>${c.config.name} <span class="hint">${c.channel_id}</span></td><td>${c.config.channel_type}${c.config.is_enabled === false ? ' (disabled)' : ''}</td>
              <td>${c.delivery ? `${c.delivery.status}${c.delivery.last_error ? `: ${c.delivery.last_error}` : ''}` : ''}</td>
              <td><button type="button" class="danger" onClick=${() => remove(c)}>Delete ${c.config.name}</button></td></tr>`)}</tbody>
        </table>`}
      <form class="grid-form" onSubmit=${create} aria-label="New channel">
        <div class="row">
          <label>Channel type
            <select value=${type} onChange=${(e) => setType(e.target.value)}>
              ${Object.entries(CHANNEL_TYPES).map(([k, l]) => html`<option value=${k}>${l}</option>`)}
            </select>
          </label>
          <label>Channel name <input name="name" required /></label>
          <label>Channel id <span class="hint">(optional)</span> <input name="id" /></label>
        </div>
        ${type === 'email' ? html`
          <label>SMTP account <input name="smtp" required /></label>
          <label>Recipients <span class="hint">(comma-separated)</span> <input name="recipients" required /></label>`
        : html`<label>${type === 'slack' ? 'Incoming webhook URL' : 'URL'} <input name="url" type="url" required /></label>`}
        <button type="submit">Create channel</button>
      </form>
    </section>`;
}

export function Monitors() {
  const [monitors, setMonitors] = useState(null);
  const [chosen, setChosen] = useState(null);
  const [last, setLast] = useState({});
  const [error, setError] = useState(null);
  // A new editor after each monitor created.
  const [made, setMade] = useState(0);
  const [channels, setChannels] = useState([]);
  // The channels, each with how its alerts went (its own record holds that).
  async function loadChannels() {
    try {
      const listed = await api('GET', '/alerts');
      setChannels(await Promise.all(listed.channels.map((c) => api('GET', `/alert/${encodeURIComponent(c.channel_id)}`).catch(() => c))));
    } catch (e) {
      setError(e.message);
    }
  }
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
      return listed.monitors;
    } catch (e) {
      setError(e.message);
      return [];
    }
  }
  useEffect(() => {
    load();
    loadChannels();
  }, []);
  // After a change: the list again, and the chosen monitor as saved.
  async function changed(saved) {
    loadChannels();
    const listed = await load();
    if (saved) setChosen(listed.find((m) => m._id === saved._id) || saved);
  }
  return html`
    ${error && html`<p class="error" role="alert">${error}</p>`}
    ${monitors && (monitors.length === 0 ? html`<p>No monitors yet.</p>` : html`
      <table>
        <caption class="visually-hidden">Monitors you may read</caption>
        <thead><tr><th scope="col">Name</th><th scope="col">Schedule</th><th scope="col">State</th><th scope="col">Last run</th></tr></thead>
        <tbody>${monitors.map((m) => html`
          <tr key=${m._id}>
            <td><button type="button" class="link" onClick=${() => setChosen(m)}>${m.monitor.name}</button></td>
            <td>${scheduleText(m.monitor.schedule)}</td>
            <td>${m.monitor.enabled === false ? 'disabled' : 'enabled'}</td>
            <td>${last[m._id] ? `${last[m._id].start_time}: ${outcome(last[m._id])}` : 'never run'}</td>
          </tr>`)}</tbody>
      </table>`)}
    ${chosen && html`<${Monitor} key=${`${chosen._id}@${chosen._version}`} monitor=${chosen} channels=${channels} onChanged=${changed} />`}
    <section aria-labelledby="new-monitor-title">
      <h2 id="new-monitor-title">New monitor</h2>
      <${MonitorEditor} key=${made} initial=${EXAMPLE} id=${null} channels=${channels} onSaved=${async (saved) => {
        setMade(made + 1);
        await changed(saved);
      }} />
    </section>
    <${Channels} channels=${channels} onChanged=${loadChannels} />`;
}
