import type { Middleware, Next, ParameterizedContext } from 'koa';
import { ShellError } from './errors.js';
import type { Principal, Role } from '../keys/principal.js';
import type { ShellState } from './state.js';

/** Synchronous for a key it knows; a promise where it must look further (a key made a moment ago). */
export type Authenticate = (key: string | undefined) => Principal | null | Promise<Principal | null>;

/**
 * A repeated `X-API-KEY` is refused before the key store sees it: Node would join the values with
 * ', ', and which of two keys the caller meant is not ours to guess.
 */
export function authenticate(lookup: Authenticate): Middleware<ShellState> {
  // Not async, like the other guards of a route: koa-compose turns a throw into a rejection, and an
  // async function would add a promise to every request for nothing.
  return (ctx, next) => {
    const values = ctx.req.headersDistinct['x-api-key'] ?? [];
    if (values.length !== 1 || !values[0]) throw new ShellError('UNAUTHORIZED');
    const found = lookup(values[0]);
    return found instanceof Promise ? found.then((principal) => admit(ctx, principal, next)) : admit(ctx, found, next);
  };
}

/** A known key costs no closure: this runs on every request. */
function admit(ctx: ParameterizedContext<ShellState>, principal: Principal | null, next: Next): Promise<void> {
  if (!principal) throw new ShellError('UNAUTHORIZED');
  ctx.state.principal = principal;
  return next();
}

/** Lets a key of one of these roles through; any other is FORBIDDEN. */
export function requireRole(...roles: readonly Role[]): Middleware<ShellState> {
  return (ctx, next) => {
    const role = ctx.state.principal?.role;
    if (role === undefined || !roles.includes(role)) throw new ShellError('FORBIDDEN');
    return next();
  };
}
