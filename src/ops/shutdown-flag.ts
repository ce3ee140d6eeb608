// The shutdown flag. Once raised, /readyz says "shutting down" (a load balancer stops sending) and
// every response closes its connection, so a keep-alive client opens its next request elsewhere
// instead of sending it down a socket that is about to go. Waiting for the requests in flight is
// the servers' close, not this.

import type { Middleware } from 'koa';

export class ShutdownFlag {
  private raised = false;

  get shuttingDown(): boolean {
    return this.raised;
  }

  raise(): void {
    this.raised = true;
  }

  /** Closes each response's connection once the flag is raised. */
  middleware(): Middleware {
    return async (ctx, next) => {
      try {
        await next();
      } finally {
        if (this.raised) ctx.set('Connection', 'close');
      }
    };
  }
}
