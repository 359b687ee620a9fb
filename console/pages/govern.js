// Govern (the account's root user only): users, roles with a field security editor (Allow,
// Deny, Mask), and the rotation of one's own keys. Documents go as JSON, as the governance
// routes take them with Content-Type: application/json.

import {html, useEffect, useState} from '../vendor/preact-htm.js';
import {api} from '../api.js';

const VERSION = '2025-01-01';
const list = (text) => text.split(',').map((s) => s.trim()).filter(Boolean);

/** Keys shown once (a new user's, or one's own after rotation). */
function Keys({keys}) {
  if (!keys) return null;
  return html`
    <div class="keys" role="status">
      <p>Keys of ${keys.who}, shown only now: keep the secret key.</p>
      <dl><dt>Access key</dt><dd><code>${keys.access_key}</code></dd>
        <dt>Secret key</dt><dd><code>${keys.secret_key}</code></dd></dl>
    </div>`;
}

function Users({roles, onKeys}) {
  const [users, setUsers] = useState([]);
  const [error, setError] = useState(null);
  const load = () => api('GET', '/users').then(setUsers).catch((e) => setError(e.message));
  useEffect(() => {
    load();
  }, []);
  async function create(event) {
    event.preventDefault();
    const form = new FormData(event.target);
    const name = form.get('name');
    setError(null);
    try {
      const made = await api('PUT', `/user/${encodeURIComponent(name)}`, {
        Version: VERSION, Password: form.get('password'), Roles: list(form.get('roles')),
      });
      if (made.secret_key) onKeys({who: name, ...made});
      event.target.reset();
      load();
    } catch (e) {
      setError(e.message);
    }
  }
  async function remove(name) {
    setError(null);
    try {
      await api('DELETE', `/user/${encodeURIComponent(name)}`);
      load();
    } catch (e) {
      setError(e.message);
    }
  }
  return html`
    <section aria-labelledby="users-title">
      <h2 id="users-title">Users</h2>
      <table>
        <thead><tr><th scope="col">Name</th><th scope="col">Roles</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
        <tbody>${users.map((u) => html`
          <tr key=${u.username}><td>${u.username}</td><td>${(u.Roles || []).join(', ')}</td>
            <td>${u.username !== 'root' && html`<button type="button" onClick=${() => remove(u.username)}>Delete ${u.username}</button>`}</td></tr>`)}
        </tbody>
      </table>
      <form class="grid-form" onSubmit=${create}>
        <label>User name <input name="name" required pattern="[A-Za-z0-9_.@-]{1,64}" /></label>
        <label>Password <span class="hint">(12 characters or more)</span> <input name="password" type="password" minlength="12" required autocomplete="new-password" /></label>
        <label>Roles <span class="hint">(comma-separated: ${roles.map((r) => r.role).join(', ') || 'none yet'})</span> <input name="roles" /></label>
        <button type="submit">Create user</button>
      </form>
      ${error && html`<p class="error" role="alert">${error}</p>`}
    </section>`;
}

/** A role's one record entry, as the editor shows it. */
function entryOf(role) {
  const record = (role.Permissions || []).find((p) => p.ResourceType === 'record') || {};
  const fields = record.Fields || {};
  return {
    name: role.role || '',
    resources: (record.Resources || []).join(', '),
    write: (record.Actions || []).includes('write'),
    allow: (fields.Allow || []).join(', '),
    deny: (fields.Deny || []).join(', '),
    masks: Object.entries(fields.Mask || {}).map(([field, how]) => ({field, how})),
  };
}

function RoleEditor({initial, onSaved}) {
  // A new role to edit mounts a new editor (its key), so nothing resets what is being typed.
  const [role, setRole] = useState(initial);
  const [error, setError] = useState(null);
  // Updates from the state as it is when they apply, not as this render saw it: two inputs in
  // a row must not undo each other.
  const set = (key) => (e) => {
    const value = e.target.type === 'checkbox' ? e.target.checked : e.target.value;
    setRole((r) => ({...r, [key]: value}));
  };
  const setMask = (i, key) => (e) => {
    const value = e.target.value;
    setRole((r) => ({...r, masks: r.masks.map((m, j) => (j === i ? {...m, [key]: value} : m))}));
  };
  async function save(event) {
    event.preventDefault();
    setError(null);
    const resources = list(role.resources);
    const fields = {};
    if (role.allow.trim()) fields.Allow = list(role.allow);
    if (role.deny.trim()) fields.Deny = list(role.deny);
    const masks = role.masks.filter((m) => m.field.trim());
    if (masks.length) fields.Mask = Object.fromEntries(masks.map((m) => [m.field.trim(), m.how]));
    const record = {ResourceType: 'record', Actions: role.write ? ['read', 'write'] : ['read'], Resources: resources};
    if (Object.keys(fields).length) record.Fields = fields;
    try {
      await api('PUT', `/role/${encodeURIComponent(role.name)}`, {
        Version: VERSION,
        Permissions: [record, {ResourceType: 'metadata', Actions: ['read'], Resources: resources}],
      });
      onSaved();
    } catch (e) {
      setError(e.message);
    }
  }
  return html`
    <form class="grid-form role-editor" onSubmit=${save} aria-labelledby="role-editor-title">
      <h3 id="role-editor-title">Role</h3>
      <label>Role name <input value=${role.name} onInput=${set('name')} required /></label>
      <label>Datasets <span class="hint">(names or patterns with *, comma-separated)</span> <input value=${role.resources} onInput=${set('resources')} required /></label>
      <label class="inline"><input type="checkbox" checked=${role.write} onChange=${set('write')} /> May write records too</label>
      <fieldset>
        <legend>Field security</legend>
        <label>Allow only <span class="hint">(empty: every field)</span> <input value=${role.allow} onInput=${set('allow')} /></label>
        <label>Deny <input value=${role.deny} onInput=${set('deny')} /></label>
        ${role.masks.map((m, i) => html`
          <div class="row" key=${i}>
            <label>Masked field <input value=${m.field} onInput=${setMask(i, 'field')} /></label>
            <label>Mask <select value=${m.how} onChange=${setMask(i, 'how')}>
              <option value="redact">redact</option><option value="nullify">nullify</option><option value="remove">remove</option>
            </select></label>
            <button type="button" onClick=${() => setRole((r) => ({...r, masks: r.masks.filter((_, j) => j !== i)}))}>Remove mask</button>
          </div>`)}
        <button type="button" onClick=${() => setRole((r) => ({...r, masks: [...r.masks, {field: '', how: 'redact'}]}))}>Add a mask</button>
      </fieldset>
      <button type="submit">Save role</button>
      ${error && html`<p class="error" role="alert">${error}</p>`}
    </form>`;
}

function Roles({roles, reload}) {
  const [editing, setEditing] = useState({entry: entryOf({}), n: 0});
  const edit = (r) => setEditing((e) => ({entry: entryOf(r), n: e.n + 1}));
  return html`
    <section aria-labelledby="roles-title">
      <h2 id="roles-title">Roles</h2>
      <ul class="plain">${roles.map((r) => html`
        <li key=${r.role}><button type="button" class="link" onClick=${() => edit(r)}>Edit ${r.role}</button>
          <span class="hint">${(r.Permissions || []).map((p) => `${p.ResourceType}:${(p.Actions || []).join('+')} on ${(p.Resources || []).join(',')}`).join('; ')}</span></li>`)}
      </ul>
      <${RoleEditor} key=${editing.n} initial=${editing.entry} onSaved=${reload} />
    </section>`;
}

export function Govern({session}) {
  const [roles, setRoles] = useState([]);
  const [keys, setKeys] = useState(null);
  const [error, setError] = useState(null);
  const load = () => api('GET', '/roles').then(setRoles).catch((e) => setError(e.message));
  useEffect(() => {
    if (session.root) load();
  }, []);
  async function rotate() {
    setError(null);
    try {
      const rotated = await api('PATCH', `/user/${encodeURIComponent(session.user)}/keys`);
      setKeys({who: session.user, ...rotated});
    } catch (e) {
      setError(e.message);
    }
  }
  if (!session.root) return html`<p>Only the account's root user governs users and roles.</p>`;
  return html`
    ${error && html`<p class="error" role="alert">${error}</p>`}
    <${Keys} keys=${keys} />
    <${Users} roles=${roles} onKeys=${setKeys} />
    <${Roles} roles=${roles} reload=${load} />
    <section aria-labelledby="keys-title">
      <h2 id="keys-title">Your keys</h2>
      <p>Rotating gives you a new access and secret key; the old ones are refused from then on.</p>
      <button type="button" onClick=${rotate}>Rotate my keys</button>
    </section>`;
}
