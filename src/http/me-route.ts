import type Router from '@koa/router';
import type { Middleware } from 'koa';
import type { LoadedRoutingConfig } from '../routing/load-config.js';
import { type Authenticate, authenticate } from './auth.js';
import type { ShellState } from './state.js';

// GET /functions/me: who the key belongs to, so a client (the console) can show the pages a role
// has and a buyer's own return reasons. It grants nothing: every other route checks the key itself.
// A buyer's terms come from the routing file in force, without anything secret (no URL, no
// secret's name), so a buyer's key cannot learn where another system is reached.

export function registerMeRoute(router: Router<ShellState>, lookup: Authenticate, routing: () => LoadedRoutingConfig, limit: Middleware<ShellState>): void {
  router.get('/functions/me', authenticate(lookup), limit, (ctx) => {
    const { role, name, keyId } = ctx.state.principal!;
    const body: Record<string, unknown> = { ok: true, trace_id: ctx.state.traceId, code: 'OK', message: `Key of ${role} ${name}.`, role, name, key_id: keyId };
    if (role === 'buyer') {
      const buyer = routing().buyers.find((b) => b.id === name);
      body.buyer = buyer
        ? { id: buyer.id, return_reasons: [...buyer.return_reasons], return_window_days: buyer.return_window_days, delivery: buyer.delivery.kind }
        : null;
    }
    ctx.body = body;
  });
}
