// Requests to the server that served this page, and nowhere else: every path is resolved
// against the page's own address and refused if it would leave its origin (the page's
// Content-Security-Policy says the same to the browser). The API key, when the server asks
// for one (401), is requested once through the prompt main.js installs, kept in this
// browser's localStorage for this origin, and sent as "Authorization: Bearer".

const KEY = 'pyllama.apiKey';

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

let keyPrompt = null; // async (reason) => key | null
let pendingKey = null; // one prompt at a time, shared by the requests that got 401

export function setKeyPrompt(fn) {
  keyPrompt = fn;
}

export const apiKey = {
  get: () => localStorage.getItem(KEY) || '',
  set: (key) => (key ? localStorage.setItem(KEY, key) : localStorage.removeItem(KEY)),
};

/** ``path`` (relative, e.g. "v1/models") as a URL of this page's origin. */
export function sameOrigin(path) {
  const url = new URL(path, document.baseURI);
  if (url.origin !== window.location.origin) throw new ApiError(0, `refusing to send a request to ${url.origin}`);
  return url;
}

async function errorMessage(response) {
  const text = await response.text().catch(() => '');
  try {
    const body = JSON.parse(text);
    const err = body.error;
    return (typeof err === 'string' ? err : err && err.message) || text;
  } catch {
    return text || response.statusText;
  }
}

async function askForKey(reason) {
  if (!keyPrompt) return null;
  if (!pendingKey) {
    pendingKey = keyPrompt(reason).finally(() => {
      pendingKey = null;
    });
  }
  return pendingKey;
}

/** fetch() with the key; JSON bodies are encoded. Throws ApiError for a status >= 400
 * (after asking for a key on 401, then retrying). */
export async function request(path, { method = 'GET', json, headers = {}, signal } = {}) {
  const body = json === undefined ? undefined : JSON.stringify(json);
  for (let attempt = 0; ; attempt++) {
    const h = { ...headers };
    if (body !== undefined) h['Content-Type'] = 'application/json';
    const key = apiKey.get();
    if (key) h.Authorization = `Bearer ${key}`;
    const response = await fetch(sameOrigin(path), {
      method, headers: h, body, signal, credentials: 'same-origin', cache: 'no-store', referrerPolicy: 'no-referrer',
    });
    if (response.ok) return response;
    const message = await errorMessage(response);
    if (response.status === 401 && attempt < 3) {
      const given = await askForKey(key ? 'The server refused this key.' : 'This server asks for an API key.');
      if (given) {
        apiKey.set(given);
        continue;
      }
    }
    throw new ApiError(response.status, message);
  }
}

export async function getJson(path, options) {
  return (await request(path, options)).json();
}
