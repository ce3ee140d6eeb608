import type { Principal } from './principal.js';

/** What the shell keeps on `ctx.state` for the middlewares after it and for the access log. */
export interface ShellState {
  traceId: string;
  principal?: Principal;
  /** The route pattern for the access log when the router did not match one (405). */
  route?: string;
}
