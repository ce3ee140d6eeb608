// The shutdown flag. Once raised, /readyz says "shutting down" (a load balancer stops sending) and
// every response closes its connection, so a keep-alive client opens its next request elsewhere
// instead of sending it down a socket that is about to go. Waiting for the requests in flight is
// the servers' close, not this.
// The ops middleware (routes.ts) reads the flag on every response.

export class ShutdownFlag {
  private raised = false;

  get shuttingDown(): boolean {
    return this.raised;
  }

  raise(): void {
    this.raised = true;
  }
}
