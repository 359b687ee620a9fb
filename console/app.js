// The console's shell: sign-in, then the pages behind a menu, chosen by the URL's fragment
// (#/datasets, ...). Plain ES modules; preact with htm templates (vendor/), no build step.

import {html, render, useEffect, useState} from './vendor/preact-htm.js';
import {currentSession, signIn, signOut} from './api.js';
import {Datasets} from './pages/datasets.js';
import {Query} from './pages/query.js';
import {Chat} from './pages/chat.js';
import {Govern} from './pages/govern.js';
import {Monitors} from './pages/monitors.js';
import {Connections} from './pages/connections.js';

const PAGES = [
  {path: 'datasets', title: 'Datasets', view: Datasets},
  {path: 'query', title: 'Query', view: Query},
  {path: 'chat', title: 'Chat', view: Chat},
  {path: 'monitors', title: 'Monitors', view: Monitors},
  {path: 'connections', title: 'Connections', view: Connections},
  {path: 'govern', title: 'Govern', view: Govern, root: true},
];

function route(session) {
  const path = location.hash.replace(/^#\/?/, '');
  const pages = PAGES.filter((p) => !p.root || session.root);
  return pages.find((p) => p.path === path) || pages[0];
}

function SignIn({onSignedIn}) {
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  async function submit(event) {
    event.preventDefault();
    const form = new FormData(event.target);
    setBusy(true);
    setError(null);
    try {
      onSignedIn(await signIn(form.get('username'), form.get('password'), form.get('account')));
    } catch (e) {
      setError(e.message);
    } finally {
      setBusy(false);
    }
  }
  return html`
    <main class="sign-in">
      <h1>strata</h1>
      <form onSubmit=${submit}>
        <label>User name <input name="username" autocomplete="username" required autofocus /></label>
        <label>Password <input name="password" type="password" autocomplete="current-password" required /></label>
        <label>Account <span class="hint">(when the server holds several)</span>
          <input name="account" autocomplete="organization" /></label>
        ${error && html`<p class="error" role="alert">${error}</p>`}
        <button type="submit" disabled=${busy}>Sign in</button>
      </form>
    </main>`;
}

function Shell({session, onSignedOut}) {
  const [page, setPage] = useState(route(session));
  useEffect(() => {
    const changed = () => setPage(route(session));
    addEventListener('hashchange', changed);
    return () => removeEventListener('hashchange', changed);
  }, []);
  async function out() {
    await signOut().catch(() => {});
    onSignedOut();
  }
  const View = page.view;
  return html`
    <header>
      <a class="brand" href="#/">strata</a>
      <nav aria-label="Pages">
        <ul>
          ${PAGES.filter((p) => !p.root || session.root).map((p) => html`
            <li key=${p.path}><a href=${'#/' + p.path} aria-current=${p === page ? 'page' : undefined}>${p.title}</a></li>`)}
        </ul>
      </nav>
      <span class="who">${session.user}@${session.account}</span>
      <button type="button" onClick=${out}>Sign out</button>
    </header>
    <main id="page"><h1>${page.title}</h1><${View} session=${session} /></main>`;
}

function App() {
  const [session, setSession] = useState(undefined);
  useEffect(() => {
    currentSession().then(setSession).catch(() => setSession(null));
  }, []);
  if (session === undefined) return html`<p aria-busy="true">Loading…</p>`;
  if (!session) return html`<${SignIn} onSignedIn=${setSession} />`;
  return html`<${Shell} session=${session} onSignedOut=${() => setSession(null)} />`;
}

render(html`<${App} />`, document.getElementById('app'));
