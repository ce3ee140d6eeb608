// The shutdown flag. Once set, /readyz says "shutting down" (a load balancer stops sending) and
// every response closes its connection, so a keep-alive client opens its next request elsewhere
// instead of sending it down a socket that is about to go.

import type { Middleware } from 'koa';

export class Drain {
  private started = false;

  get draining(): boolean {
    return this.started;
  }

  start(): void {
    this.started = true;
  }

  middleware(): Middleware {
    return async (ctx, next) => {
      try {
        await next();
      } finally {
        if (this.started) ctx.set('Connection', 'close');
      }
    };
  }
}
