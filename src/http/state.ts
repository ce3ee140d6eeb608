import type { Principal } from '../keys/principal.js';

/** What the shell keeps on `ctx.state` for the middlewares after it and for the access log. */
export interface ShellState {
  traceId: string;
  /** The routing file's currency, which every envelope names (read once per request). */
  currency: string;
  principal?: Principal;
  /** The route pattern for the access log when the router did not match one (405). */
  route?: string;
  /** Set by a route that serves a page to browsers: its CSP and caching, over the JSON defaults. */
  pageHeaders?: Readonly<Record<'Content-Security-Policy' | 'Cache-Control', string>>;
}
