import type { ClientRequest } from 'node:http';
import { Agent } from 'node:https';
import { createSecureContext, rootCertificates } from 'node:tls';

// Kept-alive connections to buyers' endpoints (webhook deliveries, bids): a TLS handshake per
// request would cost a ping a good part of its deadline. A kept connection goes stale under a
// request when the buyer closes it for having been idle its own keep-alive time (Node and Apache:
// 5 s, said in a `Keep-Alive: timeout=5` header; nginx 75 s and load balancers 60 s, often unsaid)
// just as the request is sent on it: the request meets a reset before any answer, and a bid was
// lost or a delivery attempt spent on it. So a free connection is closed after IDLE_MS, or a second
// before the buyer's own hint says the buyer will (Node's agent heeds the hint only when it has a
// timeout of its own), and a request that meets a reset on a reused connection before any answer
// is sent once more on a new one (see staleConnection): the buyer closed an idle connection, so it
// never read that request.

/** A free connection to a buyer is closed after this long, sooner when the buyer's Keep-Alive header asks for it. */
export const IDLE_MS = 30_000;

/**
 * The connections requests to buyers go out on. `sentAgain` is told of every request sent once more
 * after a stale connection: a buyer that keeps closing connections just as they are reused shows in
 * /metrics before its requests start to fail. A plain Agent (a test's) has none.
 */
/** What a request to a buyer is, as /metrics tells them apart. */
export type BuyerRequestKind = 'bid' | 'delivery' | 'erasure_notice';

export type BuyerConnections = Agent & { readonly sentAgain?: () => void };

export interface BuyerAgentOptions {
  readonly maxSockets?: number;
  /** A certificate trusted on top of the system's (a test's self-signed buyer), parsed once for every connection. */
  readonly ca?: string | Buffer | undefined;
  readonly sentAgain?: (() => void) | undefined;
}

export function buyerAgent(options: BuyerAgentOptions = {}): BuyerConnections {
  const agent = new Agent({
    keepAlive: true,
    timeout: IDLE_MS,
    ...(options.maxSockets ? { maxSockets: options.maxSockets } : {}),
    ...(options.ca ? { secureContext: createSecureContext({ ca: [...rootCertificates, options.ca] }) } : {}),
  });
  return options.sentAgain ? Object.assign(agent, { sentAgain: options.sentAgain }) : agent;
}

/** Whether a request failed because the kept connection it was sent on had been closed by the buyer: worth sending once more. */
export function staleConnection(req: ClientRequest, error: NodeJS.ErrnoException): boolean {
  return req.reusedSocket && (error.code === 'ECONNRESET' || error.code === 'EPIPE');
}
