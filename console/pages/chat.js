// Chat: conversation threads about a dataset; questions asked over the conversation socket,
// answers arriving on it with the query they ran and their result drawn as suggested.

import {html, useEffect, useRef, useState} from '../vendor/preact-htm.js';
import {api} from '../api.js';
import {Chart, chartOf} from '../chart.js';
import {ResultTable} from '../results.js';

/** The conversation socket, opened on first use (the session cookie signs it in). */
function openSocket(onFrame) {
  const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
  const socket = new WebSocket(`${scheme}://${location.host}/assistant/nl`);
  socket.addEventListener('message', (event) => {
    try {
      onFrame(JSON.parse(event.data));
    } catch {
      // Not JSON: not a frame of ours.
    }
  });
  return socket;
}

function Answer({content}) {
  const result = content.result;
  let shown = null;
  if (result) {
    const data = result.data || result;
    if (content.visualization === 'table' && result.columns) {
      shown = html`<${ResultTable} columns=${result.columns.map((c) => c.name)} rows=${result.rows} />`;
    } else {
      shown = html`<${Chart} chart=${chartOf(data)} />`;
    }
  }
  return html`
    <div class="answer">
      <p>${content.text}</p>
      ${content.query && html`
        <details>
          <summary>The ${content.query.language === 'promql' ? 'PromQL' : 'SQL'} query it ran</summary>
          <pre class="json">${content.query.text}</pre>
        </details>`}
      ${shown}
      ${content.suggestions && html`
        <ul class="suggestions">${content.suggestions.map((s) => html`<li>${s}</li>`)}</ul>`}
    </div>`;
}

function Thread({thread}) {
  const [messages, setMessages] = useState([]);
  const [stage, setStage] = useState(null);
  const [error, setError] = useState(null);
  const [question, setQuestion] = useState('');
  const socket = useRef(null);
  const list = useRef(null);

  async function load() {
    setMessages(await api('GET', `/assistant/threads/${thread.id}/messages`));
  }
  useEffect(() => {
    load().catch((e) => setError(e.message));
    const opened = openSocket((frame) => {
      if (frame.thread_id !== thread.id) return;
      if (frame.type === 'progress') setStage(frame.stage);
      if (frame.type === 'answer' || frame.type === 'error') {
        setStage(null);
        if (frame.type === 'error') setError(frame.message);
        load().catch((e) => setError(e.message));
      }
      if (frame.type === 'accepted') load().catch((e) => setError(e.message));
    });
    opened.addEventListener('open', () => opened.send(JSON.stringify({type: 'subscribe', thread_id: thread.id})));
    socket.current = opened;
    return () => opened.close();
  }, [thread.id]);
  useEffect(() => {
    if (list.current) list.current.scrollTop = list.current.scrollHeight;
  }, [messages, stage]);

  function ask(event) {
    event.preventDefault();
    const text = question.trim();
    const opened = socket.current;
    if (!text || !opened || opened.readyState > WebSocket.OPEN) return;
    setError(null);
    setStage('sent');
    const send = () => opened.send(JSON.stringify({thread_id: thread.id, role: 'user', content: {user_query: text}}));
    if (opened.readyState === WebSocket.OPEN) send();
    else opened.addEventListener('open', send, {once: true});
    setQuestion('');
  }
  return html`
    <section class="thread" aria-label=${`Thread ${thread.name}`}>
      <h2>${thread.name} <span class="hint">about ${thread.index_name}</span></h2>
      <ol class="messages" ref=${list} aria-live="polite">
        ${messages.map((m) => html`
          <li key=${m.message_id} class=${m.role}>
            ${m.role === 'user' ? html`<p class="question">${m.content.user_query}</p>` : html`<${Answer} content=${m.content} />`}
          </li>`)}
        ${stage && html`<li class="assistant"><p aria-busy="true">${stage === 'running' ? 'Running the query…' : 'Thinking…'}</p></li>`}
      </ol>
      ${error && html`<p class="error" role="alert">${error}</p>`}
      <form class="composer" onSubmit=${ask}>
        <label class="visually-hidden" for="question">Your question</label>
        <input id="question" value=${question} onInput=${(e) => setQuestion(e.target.value)}
          placeholder="how many errors in the last hour?" autocomplete="off" />
        <button type="submit">Ask</button>
      </form>
    </section>`;
}

export function Chat() {
  const [threads, setThreads] = useState(null);
  const [chosen, setChosen] = useState(null);
  const [error, setError] = useState(null);
  async function load() {
    const listed = await api('GET', '/assistant/threads');
    setThreads(listed);
    return listed;
  }
  useEffect(() => {
    load().catch((e) => setError(e.message));
  }, []);
  async function create(event) {
    event.preventDefault();
    const form = new FormData(event.target);
    try {
      const made = await api('POST', '/assistant/threads', {name: form.get('name'), index_name: form.get('index_name')});
      await load();
      setChosen(made);
      event.target.reset();
    } catch (e) {
      setError(e.message);
    }
  }
  return html`
    <div class="chat">
      <aside>
        <form class="new-thread" onSubmit=${create}>
          <label>Thread name <input name="name" required /></label>
          <label>Dataset <input name="index_name" required placeholder="logs, or connection:table" /></label>
          <button type="submit">New thread</button>
        </form>
        ${error && html`<p class="error" role="alert">${error}</p>`}
        <nav aria-label="Threads">
          <ul class="threads">
            ${(threads || []).map((t) => html`
              <li key=${t.id}><button type="button" class="link" aria-current=${chosen && chosen.id === t.id ? 'true' : undefined}
                onClick=${() => setChosen(t)}>${t.name}</button> <span class="hint">${t.index_name}</span></li>`)}
          </ul>
        </nav>
      </aside>
      ${chosen ? html`<${Thread} key=${chosen.id} thread=${chosen} />` : html`<p>Choose a thread, or start one about a dataset.</p>`}
    </div>`;
}


