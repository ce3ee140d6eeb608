// Talking to the service: the same public routes as any API client, with the key the user typed.
// The key lives in this tab's sessionStorage only: closing the tab or signing out forgets it.

const KEY = 'leadpost.apiKey';

export const session = {
  get key() {
    return sessionStorage.getItem(KEY);
  },
  signIn(key) {
    sessionStorage.setItem(KEY, key);
  },
  signOut() {
    sessionStorage.removeItem(KEY);
  },
};

/** A refusal from the service, with its envelope (code, message, errors). */
export class ApiError extends Error {
  constructor(status, body) {
    super(body?.message ?? `HTTP ${status}`);
    this.status = status;
    this.body = body ?? {};
  }
}

async function call(path, accept) {
  const response = await fetch(path, { headers: { 'X-API-KEY': session.key ?? '', Accept: accept }, cache: 'no-store' });
  return response;
}

/** GET a JSON route; rejects with ApiError when the answer is not 2xx. */
export async function getJson(path) {
  const response = await call(path, 'application/json');
  const body = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

/** POST a JSON body (or none); rejects with ApiError when the answer is not 2xx. */
export async function postJson(path, body) {
  const headers = { 'X-API-KEY': session.key ?? '', Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(path, { method: 'POST', headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' });
  const answer = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(response.status, answer);
  return answer;
}

/** GET a route as CSV: the body as a Blob and the file name the service suggests. */
export async function getCsv(path) {
  const response = await call(path, 'text/csv');
  if (!response.ok) throw new ApiError(response.status, await response.json().catch(() => null));
  const disposition = response.headers.get('Content-Disposition') ?? '';
  const name = /filename="([^"]+)"/.exec(disposition)?.[1] ?? 'leadpost-report.csv';
  return { blob: await response.blob(), name };
}

/** Every page of a list route, following next_cursor, up to `maxRows`. */
export async function getAll(path, params, maxRows = 10_000) {
  const items = [];
  let cursor = null;
  let head = null;
  do {
    const query = new URLSearchParams({ ...params, limit: '500', ...(cursor ? { cursor } : {}) });
    const page = await getJson(`${path}?${query}`);
    head ??= page;
    items.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor && items.length < maxRows);
  return { head, items, truncated: Boolean(cursor) };
}

/** /readyz needs no key; a 503 still carries the checks. */
export async function readiness() {
  const response = await fetch('/readyz', { cache: 'no-store' });
  return response.json();
}

/** What to show for a failed call. */
export function explain(error) {
  if (error instanceof ApiError) {
    const fields = (error.body.errors ?? []).map((e) => `${e.field}: ${e.message}`);
    return [`${error.status} ${error.body.code ?? ''}: ${error.message}`, ...fields].join(' — ');
  }
  return String(error?.message ?? error);
}
