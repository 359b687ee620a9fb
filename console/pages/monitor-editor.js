// A monitor's editor: its document as a form (name, schedule, query, triggers with their
// conditions, actions with their channel and templates) or as JSON, the two kept as one; a test
// run of the document as it is (POST /monitor/_execute: the next five run times, the query's
// result, each trigger's condition, each action's rendered subject and message), and saving it
// (POST /monitor for a new one, PATCH /monitor/{id} for a saved one).

import {html, useState} from '../vendor/preact-htm.js';
import {api} from '../api.js';

export const EXAMPLE = {
  name: 'errors in logs',
  enabled: true,
  schedule: {period: {interval: 5, unit: 'MINUTES'}},
  query: {type: 'sql', statement: "SELECT COUNT(*) AS errors FROM logs WHERE level = 'error'"},
  triggers: [],
};

const UNITS = ['MINUTES', 'HOURS', 'DAYS'];
const THROTTLE_UNITS = ['SECONDS', 'MINUTES', 'HOURS', 'DAYS'];
const QUERY_TYPES = {sql: 'SQL', querydsl: 'Query DSL', promql: 'PromQL', assistant: 'A question (assistant)'};
const CONDITIONS = {
  count_greater_than: 'count greater than', count_less_than: 'count less than', count_equals: 'count equals',
  field_greater_than: 'field greater than', field_less_than: 'field less than', field_equals: 'field equals',
  field_not_equals: 'field not equals', field_contains: 'field contains', field_starts_with: 'field starts with',
  field_ends_with: 'field ends with', field_matches: 'field matches (regular expression)',
  script: 'script (CEL)', always: 'always',
};

/** The fields of a saved monitor that its document holds (what PATCH takes back). */
export function documentOf(monitor) {
  const {name, enabled, schedule, query, triggers} = monitor;
  return {name, enabled, schedule, query, triggers: triggers || []};
}

/** `doc` with the value at `path` (keys and indexes) replaced; `undefined` removes it. */
function put(doc, path, value) {
  const copy = structuredClone(doc);
  let at = copy;
  for (const key of path.slice(0, -1)) {
    if (at[key] === undefined || at[key] === null) at[key] = typeof key === 'number' ? [] : {};
    at = at[key];
  }
  const last = path[path.length - 1];
  if (value === undefined) delete at[last];
  else at[last] = value;
  return copy;
}

/** A number typed into a field: the number, or the text while it is not one. */
function numeric(text) {
  return text.trim() !== '' && !Number.isNaN(Number(text)) ? Number(text) : text;
}

/** A JSON value edited as text: its value when it parses, its error while it does not. */
function JsonField({label, value, onChange, rows = 4}) {
  const [text, setText] = useState(JSON.stringify(value ?? {}, null, 2));
  const [error, setError] = useState(null);
  function input(event) {
    setText(event.target.value);
    try {
      onChange(JSON.parse(event.target.value));
      setError(null);
    } catch (e) {
      setError(e.message);
    }
  }
  return html`
    <label>${label}
      <textarea rows=${rows} spellcheck=${false} value=${text} onInput=${input} aria-invalid=${error ? 'true' : 'false'}></textarea>
      ${error && html`<span class="error">not JSON: ${error}</span>`}
    </label>`;
}

function Schedule({schedule, set}) {
  const kind = schedule && schedule.cron ? 'cron' : 'period';
  return html`
    <fieldset>
      <legend>Schedule</legend>
      <div class="row">
        <label>Runs
          <select value=${kind} onChange=${(e) => set(['schedule'], e.target.value === 'cron'
            ? {cron: {expression: '0 0 * * * *', timezone: 'UTC'}} : {period: {interval: 5, unit: 'MINUTES'}})}>
            <option value="period">every…</option>
            <option value="cron">on a cron schedule</option>
          </select>
        </label>
        ${kind === 'period' ? html`
          <label>Interval <input type="number" min="1" value=${schedule.period.interval}
            onInput=${(e) => set(['schedule', 'period', 'interval'], numeric(e.target.value))} /></label>
          <label>Unit
            <select value=${schedule.period.unit} onChange=${(e) => set(['schedule', 'period', 'unit'], e.target.value)}>
              ${UNITS.map((u) => html`<option value=${u}>${u.toLowerCase()}</option>`)}
            </select>
          </label>` : html`
          <label>Cron expression <span class="hint">(seconds first)</span> <input value=${schedule.cron.expression}
            onInput=${(e) => set(['schedule', 'cron', 'expression'], e.target.value)} /></label>
          <label>Time zone <input value=${schedule.cron.timezone || ''} placeholder="UTC"
            onInput=${(e) => set(['schedule', 'cron', 'timezone'], e.target.value || undefined)} /></label>`}
      </div>
    </fieldset>`;
}

function Query({query, set}) {
  const type = query.type;
  const change = (next) => set(['query'], {
    sql: {type: 'sql', statement: 'SELECT COUNT(*) FROM logs'},
    querydsl: {type: 'querydsl', datasets: ['logs'], body: {size: 0, query: {match_all: {}}}},
    promql: {type: 'promql', query: 'up'},
    assistant: {type: 'assistant', datasets: ['logs'], body: {query: 'how many records in the last hour?'}},
  }[next]);
  const datasets = html`
    <label>Datasets <span class="hint">(comma-separated)</span>
      <input value=${(query.datasets || []).join(', ')}
        onInput=${(e) => set(['query', 'datasets'], e.target.value.split(',').map((d) => d.trim()).filter(Boolean))} /></label>`;
  return html`
    <fieldset>
      <legend>Query</legend>
      <label>Query type
        <select value=${type} onChange=${(e) => change(e.target.value)}>
          ${Object.entries(QUERY_TYPES).map(([k, l]) => html`<option value=${k}>${l}</option>`)}
        </select>
      </label>
      ${type === 'sql' && html`
        <label>Statement <textarea rows="3" spellcheck=${false} value=${query.statement || ''}
          onInput=${(e) => set(['query', 'statement'], e.target.value)}></textarea></label>`}
      ${type === 'querydsl' && html`${datasets}
        <${JsonField} key="body" label="Search body (JSON)" value=${query.body} onChange=${(v) => set(['query', 'body'], v)} />`}
      ${type === 'promql' && html`
        <label>Metrics dataset <span class="hint">(optional)</span> <input value=${query.index || ''}
          onInput=${(e) => set(['query', 'index'], e.target.value || undefined)} /></label>
        <label>PromQL <input value=${query.query || ''} onInput=${(e) => set(['query', 'query'], e.target.value)} /></label>`}
      ${type === 'assistant' && html`${datasets}
        <label>Question <input value=${(query.body || {}).query || ''}
          onInput=${(e) => set(['query', 'body'], {query: e.target.value})} /></label>`}
    </fieldset>`;
}

function Condition({condition, at, set}) {
  const type = condition.type;
  const change = (next) => set(at, next.startsWith('count_') ? {type: next, threshold: condition.threshold ?? 0}
    : next.startsWith('field_') ? {type: next, path: condition.path ?? '/rows/0/0', value: condition.value ?? 0}
      : next === 'script' ? {type: next, script: {source: 'ctx.results[0].size > 0'}} : {type: next});
  return html`
    <div class="row">
      <label>Condition
        <select value=${type} onChange=${(e) => change(e.target.value)}>
          ${Object.entries(CONDITIONS).map(([k, l]) => html`<option value=${k}>${l}</option>`)}
        </select>
      </label>
      ${type.startsWith('count_') && html`
        <label>Threshold <input type="number" value=${condition.threshold} onInput=${(e) => set([...at, 'threshold'], numeric(e.target.value))} /></label>`}
      ${type.startsWith('field_') && html`
        <label>Path <span class="hint">(JSON pointer into the result)</span>
          <input value=${condition.path} onInput=${(e) => set([...at, 'path'], e.target.value)} /></label>
        <label>Value <input value=${condition.value} onInput=${(e) => set([...at, 'value'], numeric(e.target.value))} /></label>`}
      ${type === 'script' && html`
        <label>Script <input value=${(condition.script || {}).source || ''} onInput=${(e) => set([...at, 'script'], {source: e.target.value})} /></label>`}
    </div>`;
}

function Action({action, at, channels, set, remove}) {
  const throttle = action.throttle;
  return html`
    <fieldset class="action">
      <legend>Action ${action.name}</legend>
      <div class="row">
        <label>Action name <input value=${action.name} onInput=${(e) => set([...at, 'name'], e.target.value)} required /></label>
        <label>Channel
          <select value=${action.destination_id} onChange=${(e) => set([...at, 'destination_id'], e.target.value)}>
            ${!channels.some((c) => c.channel_id === action.destination_id) && html`<option value=${action.destination_id}>${action.destination_id || 'choose a channel'}</option>`}
            ${channels.map((c) => html`<option value=${c.channel_id}>${c.config.name} (${c.config.channel_type})</option>`)}
          </select>
        </label>
        <button type="button" onClick=${remove}>Remove action ${action.name}</button>
      </div>
      <label>Subject template <input value=${(action.subject_template || {}).source || ''}
        onInput=${(e) => set([...at, 'subject_template'], {source: e.target.value})} /></label>
      <label>Message template <textarea rows="2" value=${(action.message_template || {}).source || ''}
        onInput=${(e) => set([...at, 'message_template'], {source: e.target.value})}></textarea></label>
      <div class="row">
        <label class="inline"><input type="checkbox" checked=${!!throttle}
          onChange=${(e) => set([...at, 'throttle'], e.target.checked ? {value: 10, unit: 'MINUTES'} : undefined)} /> Throttle</label>
        ${throttle && html`
          <label>At most once per <input type="number" min="1" value=${throttle.value}
            onInput=${(e) => set([...at, 'throttle', 'value'], numeric(e.target.value))} /></label>
          <label>Throttle unit
            <select value=${throttle.unit} onChange=${(e) => set([...at, 'throttle', 'unit'], e.target.value)}>
              ${THROTTLE_UNITS.map((u) => html`<option value=${u}>${u.toLowerCase()}</option>`)}
            </select>
          </label>`}
      </div>
    </fieldset>`;
}

function Trigger({trigger, index, channels, set, remove}) {
  const at = ['triggers', index];
  const actions = trigger.actions || [];
  const add = () => set([...at, 'actions'], [...actions, {
    name: `action ${actions.length + 1}`,
    destination_id: channels.length ? channels[0].channel_id : '',
    subject_template: {source: '{{monitor.name}}: {{trigger.name}}'},
    message_template: {source: 'Monitor {{monitor.name}} fired at {{timestamp}}.'},
  }]);
  return html`
    <fieldset class="trigger">
      <legend>Trigger ${trigger.name}</legend>
      <div class="row">
        <label>Trigger name <input value=${trigger.name} onInput=${(e) => set([...at, 'name'], e.target.value)} required /></label>
        <label>Severity
          <select value=${String(trigger.severity ?? 1)} onChange=${(e) => set([...at, 'severity'], Number(e.target.value))}>
            ${[1, 2, 3, 4, 5].map((s) => html`<option value=${String(s)}>${s}</option>`)}
          </select>
        </label>
        <button type="button" onClick=${remove}>Remove trigger ${trigger.name}</button>
      </div>
      <${Condition} condition=${trigger.condition || {type: 'always'}} at=${[...at, 'condition']} set=${set} />
      ${actions.map((action, i) => html`<${Action} key=${i} action=${action} at=${[...at, 'actions', i]} channels=${channels} set=${set}
        remove=${() => set([...at, 'actions'], actions.filter((_, j) => j !== i))} />`)}
      <button type="button" onClick=${add}>Add an action to ${trigger.name}</button>
    </fieldset>`;
}

/** What a run says in a few words: its error, or which triggers fired. */
export function outcome(run) {
  if (!run) return 'never run';
  if (run.error) return `error: ${run.error}`;
  const triggers = Object.values(run.trigger_results || {});
  const fired = triggers.filter((t) => t.triggered).map((t) => t.name);
  const failed = triggers.filter((t) => t.error).map((t) => `${t.name}: ${t.error}`);
  if (failed.length) return `trigger error (${failed.join('; ')})`;
  return fired.length ? `triggered: ${fired.join(', ')}` : 'no trigger fired';
}

/** How big the query's result was: its count as conditions read it. */
function resultSize(result) {
  if (!result) return null;
  if (result.hits && result.hits.total) return `${result.hits.total.value} hits`;
  if (typeof result.size === 'number') return `${result.size} rows`;
  if (result.data && Array.isArray(result.data.result)) return `${result.data.result.length} series`;
  return null;
}

/** A run's result: when it runs next, the query's result, each trigger's condition, each
 * action's rendered subject and message. */
export function Execution({result}) {
  if (!result) return null;
  const input = result.input_results || {};
  const first = (input.results || [])[0];
  return html`
    <div class="execution" role="status">
      <p><strong>${result.monitor_name}</strong>: ${outcome(result)}</p>
      ${result.next_runs && html`
        <p>Next runs: ${result.next_runs.map((t, i) => html`${i > 0 ? ', ' : ''}<time datetime=${t}>${new Date(t).toLocaleString()}</time>`)}</p>`}
      <p>Query: ${input.error ? `error: ${input.error}` : resultSize(first) || 'ran'}</p>
      <ul class="triggers">${Object.values(result.trigger_results || {}).map((t) => html`
        <li key=${t.name}>Trigger ${t.name}: ${t.error ? `error: ${t.error}` : t.triggered ? 'condition holds' : 'condition does not hold'}
          ${Object.values(t.action_results || {}).map((a) => html`
            <div class="action" key=${a.id}>
              <p>Action ${a.name}${a.throttled ? ' (throttled)' : ''}${a.error ? `: ${a.error}` : ''}</p>
              ${a.output && html`<p class="subject">Subject: <strong>${a.output.subject}</strong></p>
                <pre class="json">${a.output.message}</pre>`}
            </div>`)}
        </li>`)}</ul>
      <details><summary>The whole result</summary><pre class="json">${JSON.stringify(result, null, 2)}</pre></details>
    </div>`;
}

/**
 * The editor of `initial` (a monitor's document); `id` the saved monitor's id, or null for a
 * new one; `channels` those its actions may alert; `onSaved(monitor)` after it is saved.
 */
export function MonitorEditor({initial, id, channels, onSaved, onCancel}) {
  const [doc, setDoc] = useState(initial);
  const [mode, setMode] = useState('form');
  const [text, setText] = useState('');
  const [tested, setTested] = useState(null);
  const [error, setError] = useState(null);
  const set = (path, value) => setDoc((now) => put(now, path, value));
  // The document as it stands: the form's, or the JSON text's when that is shown.
  function current() {
    if (mode === 'form') return doc;
    try {
      return JSON.parse(text);
    } catch (e) {
      setError(`the monitor is not JSON: ${e.message}`);
      return null;
    }
  }
  function show(next) {
    if (next === mode) return;
    if (next === 'json') {
      setText(JSON.stringify(doc, null, 2));
      setMode('json');
      return;
    }
    const parsed = current();
    if (!parsed) return;
    if (!parsed.schedule || !parsed.query || typeof parsed.query !== 'object') {
      setError('the form needs a schedule and a query: edit them as JSON');
      return;
    }
    setError(null);
    setDoc(parsed);
    setMode('form');
  }
  async function test() {
    setError(null);
    const body = current();
    if (!body) return;
    try {
      setTested(await api('POST', '/monitor/_execute', body));
    } catch (e) {
      setTested(null);
      setError(e.message);
    }
  }
  async function save(event) {
    event.preventDefault();
    setError(null);
    const body = current();
    if (!body) return;
    try {
      const saved = id
        ? await api('PATCH', `/monitor/${encodeURIComponent(id)}`, body)
        : await api('POST', '/monitor', body);
      setTested(null);
      onSaved(saved);
    } catch (e) {
      setError(e.message);
    }
  }
  const triggers = doc.triggers || [];
  const addTrigger = () => set(['triggers'], [...triggers, {
    name: `trigger ${triggers.length + 1}`, severity: 1, condition: {type: 'count_greater_than', threshold: 0}, actions: [],
  }]);
  return html`
    <form class="monitor-editor wide" onSubmit=${save} aria-label=${id ? `Edit monitor ${initial.name}` : 'New monitor'}>
      <div role="tablist" aria-label="Monitor editor">
        ${[['form', 'Form'], ['json', 'JSON']].map(([k, l]) => html`
          <button type="button" role="tab" aria-selected=${mode === k} onClick=${() => show(k)}>${l}</button>`)}
      </div>
      ${mode === 'json' ? html`
        <label>Monitor document <span class="hint">(JSON: name, schedule, query, triggers; see the API's Monitors and channels)</span>
          <textarea rows="16" spellcheck=${false} value=${text} onInput=${(e) => setText(e.target.value)}></textarea>
        </label>` : html`
        <div class="row">
          <label>Monitor name <input value=${doc.name || ''} onInput=${(e) => set(['name'], e.target.value)} required /></label>
          <label class="inline"><input type="checkbox" checked=${doc.enabled !== false} onChange=${(e) => set(['enabled'], e.target.checked)} /> Enabled</label>
        </div>
        <${Schedule} schedule=${doc.schedule} set=${set} />
        <${Query} query=${doc.query} set=${set} />
        ${triggers.map((trigger, i) => html`<${Trigger} key=${i} trigger=${trigger} index=${i} channels=${channels} set=${set}
          remove=${() => set(['triggers'], triggers.filter((_, j) => j !== i))} />`)}
        <button type="button" onClick=${addTrigger}>Add a trigger</button>`}
      <div class="row">
        <button type="button" onClick=${test}>Test (not saved)</button>
        <button type="submit">${id ? 'Save changes' : 'Create monitor'}</button>
        ${onCancel && html`<button type="button" onClick=${onCancel}>Cancel</button>`}
      </div>
      ${error && html`<p class="error" role="alert">${error}</p>`}
      <${Execution} result=${tested} />
    </form>`;
}
