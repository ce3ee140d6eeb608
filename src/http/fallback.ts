import type Router from '@koa/router';
import type { Middleware } from 'koa';
import { ShellError } from './errors.js';
import type { ShellState } from './state.js';

/**
 * Reached only when no route took the request: a known path with another method is a 405 naming
 * the methods it has (OPTIONS included: this API serves no browsers, so there is no CORS preflight
 * to answer), anything else a 404.
 */
export function notFoundOrNotAllowed(router: Router<ShellState>): Middleware<ShellState> {
  return async (ctx) => {
    const routes = router.match(ctx.path, ctx.method).path.filter((layer) => layer.methods.length > 0);
    const allowed = [...new Set(routes.flatMap((layer) => layer.methods))];
    if (allowed.length === 0) throw new ShellError('NOT_FOUND');
    const pattern = routes[0]?.path;
    if (typeof pattern === 'string') ctx.state.route = pattern;
    throw new ShellError('METHOD_NOT_ALLOWED', { Allow: allowed.join(', ') });
  };
}
