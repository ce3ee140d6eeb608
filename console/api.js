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
  constructor(status, body, retryAfter = null) {
    super(body?.message ?? `HTTP ${status}`);
    this.status = status;
    this.body = body ?? {};
    /** Seconds the service asks to wait before trying again (its Retry-After), or null. */
    this.retryAfter = retryAfter;
  }
}

/** The answer's Retry-After in seconds, when it gives one as a number. */
const retryAfterOf = (response) => {
  const seconds = Number.parseInt(response.headers.get('Retry-After') ?? '', 10);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds : null;
};

/** No answer at all: the request never reached the service, or its answer never came back. */
class Unreachable extends Error {
  constructor(cause) {
    super('The service cannot be reached. Try again.');
    this.cause = cause;
  }
}

/**
 * What the shell does about the connection as a whole, whichever page asked (app.js sets them):
 * a 401 ends the session, a failed fetch marks what is shown as stale, and the next answer to a
 * request made after that failure clears the mark.
 */
const listeners = { unauthorized() {}, unreachable() {}, reachable() {} };
export function onConnection(handlers) {
  Object.assign(listeners, handlers);
}

let failedAt = -Infinity;
async function send(path, init) {
  const started = performance.now();
  let response;
  try {
    response = await fetch(path, { ...init, cache: 'no-store' });
  } catch (error) {
    // Withdrawn by the page (a newer request overtook it): no sign of the connection either way.
    if (init.signal?.aborted) throw error;
    failedAt = performance.now();
    listeners.unreachable();
    throw new Unreachable(error);
  }
  if (started > failedAt) listeners.reachable();
  // Only a refusal of the key signed in now ends the session: a request of a key that was signed
  // out since (refused, say, and its answer late) says nothing about the one that replaced it.
  if (response.status === 401 && init.headers['X-API-KEY'] === session.key) listeners.unauthorized();
  return response;
}

const call = (path, accept, signal) => send(path, { headers: { 'X-API-KEY': session.key ?? '', Accept: accept }, signal });

/**
 * Each call takes a `signal` (from `latest()`): once it is aborted, the call rejects, whatever
 * answer came, so that nothing of a withdrawn request is drawn.
 */

/** GET a JSON route; rejects with ApiError when the answer is not 2xx, Unreachable when there is none. */
export async function getJson(path, signal) {
  const response = await call(path, 'application/json', signal);
  const body = await response.json().catch(() => null);
  signal?.throwIfAborted();
  if (!response.ok) throw new ApiError(response.status, body, retryAfterOf(response));
  return body;
}

/** POST a JSON body (or none); rejects as getJson does. */
export async function postJson(path, body, signal) {
  const headers = { 'X-API-KEY': session.key ?? '', Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await send(path, { method: 'POST', headers, body: body === undefined ? undefined : JSON.stringify(body), signal });
  const answer = await response.json().catch(() => null);
  signal?.throwIfAborted();
  if (!response.ok) throw new ApiError(response.status, answer, retryAfterOf(response));
  return answer;
}

/** GET a route as CSV: the body as a Blob; rejects as getJson does, a 429 with how long to wait. */
export async function getCsv(path, signal) {
  const response = await call(path, 'text/csv', signal);
  if (!response.ok) {
    const body = await response.json().catch(() => null);
    signal?.throwIfAborted();
    throw new ApiError(response.status, body, retryAfterOf(response));
  }
  const blob = await response.blob();
  signal?.throwIfAborted();
  return { blob };
}

/** Every page of a list route, following next_cursor, up to `maxRows`. */
export async function getAll(path, params, signal = undefined, maxRows = 10_000) {
  const items = [];
  let cursor = null;
  let head = null;
  do {
    const query = new URLSearchParams({ ...params, limit: '500', ...(cursor ? { cursor } : {}) });
    const page = await getJson(`${path}?${query}`, signal);
    head ??= page;
    items.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor && items.length < maxRows);
  return { head, items, truncated: Boolean(cursor) };
}

/**
 * What one part of a page asks for, of which only the newest request counts (a report's Show, a
 * consumer's Find): `next()` withdraws the request before it, if still on its way (aborted, so its
 * answer or failure is never drawn, and the rest of its pages are not asked for), and gives the
 * signal for the new one, to pass to the calls above and to check once they are answered:
 * `signal.aborted` means a newer request overtook it. `stop()` withdraws it without a new one.
 */
export function latest() {
  let controller = null;
  const stop = () => controller?.abort();
  return {
    next() {
      stop();
      controller = new AbortController();
      return controller.signal;
    },
    stop,
  };
}

/** /readyz needs no key; a 503 still carries the checks. */
export async function readiness() {
  const response = await send('/readyz', {});
  return response.json();
}

export const KEY_REFUSED = 'This key was not accepted: it may have been revoked or expired. Sign in again.';

/** What to show for a failed call, in plain words. */
export function explain(error) {
  if (error instanceof Unreachable) return error.message;
  if (!(error instanceof ApiError)) return String(error?.message ?? error);
  switch (error.status) {
    case 401:
      return KEY_REFUSED;
    case 403:
      return 'This key may not do this.';
    case 404:
      return 'Not found: there is no such thing, or this key may not see it.';
    case 422: {
      const fields = (error.body.errors ?? []).map((e) => e.message);
      return `Please check: ${fields.join('; ') || error.message}.`;
    }
    case 429: {
      const wait = error.retryAfter > 0 ? `${error.retryAfter} second${error.retryAfter === 1 ? '' : 's'}` : 'a few seconds';
      return `Too many requests from this key: wait ${wait} and try again.`;
    }
    default:
      return error.status >= 500 ? `The service could not answer (HTTP ${error.status}). Try again shortly.` : error.message;
  }
}

/**
 * Whether the key (GET /functions/me) is a buyer whose leads wait for it to pull them: a pull
 * buyer, or one the routing file no longer names, whose leads wait as a pull buyer's do.
 */
export const pullsItsLeads = (me) => me.role === 'buyer' && (me.buyer === null || me.buyer?.delivery === 'pull');
