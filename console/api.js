// Calls to the platform API with the console's session: the cookie goes by itself (same
// origin), and every request that is not a GET or a HEAD carries the session's CSRF token.

let csrf = null;

/** An error answer of the platform API: its status and its message. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/**
 * Sends `method path` with `body` (an object is sent as JSON, a string as it is, with
 * `contentType`); the answer's JSON (or text). Throws an ApiError for a 4xx or 5xx.
 */
export async function api(method, path, body, contentType) {
  // JSON answers, also from the routes that answer YAML by default (governance, monitors).
  const headers = {accept: 'application/json'};
  if (method !== 'GET' && method !== 'HEAD' && csrf) headers['x-csrf-token'] = csrf;
  let payload;
  if (body !== undefined && body !== null) {
    if (typeof body === 'string') {
      payload = body;
      headers['content-type'] = contentType || 'text/plain';
    } else {
      payload = JSON.stringify(body);
      headers['content-type'] = 'application/json';
    }
  }
  const response = await fetch(path, {method, headers, body: payload, credentials: 'same-origin'});
  const text = await response.text();
  let answer = text;
  try {
    answer = text ? JSON.parse(text) : null;
  } catch {
    // Not JSON: the text as it is.
  }
  if (!response.ok) {
    const message = (answer && answer.message) || text || response.statusText;
    throw new ApiError(response.status, message);
  }
  return answer;
}

/** The current session ({account, user, root, csrf_token, expires_at}), or null. */
export async function currentSession() {
  try {
    const session = await api('GET', '/console/session');
    csrf = session.csrf_token;
    return session;
  } catch (error) {
    if (error.status === 401) return null;
    throw error;
  }
}

export async function signIn(username, password, account) {
  const body = {username, password};
  if (account) body.account = account;
  const session = await api('POST', '/console/session', body);
  csrf = session.csrf_token;
  return session;
}

export async function signOut() {
  try {
    await api('DELETE', '/console/session');
  } finally {
    csrf = null;
  }
}
