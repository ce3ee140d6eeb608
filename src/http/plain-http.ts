// The plain-HTTP listener says "use HTTPS", unless a trusted TLS-terminating proxy in front vouches
// with X-Forwarded-Proto that the client did use it.

import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { logAccess } from './access-log.js';
import { noLeadEnvelope } from './envelope.js';
import { lingerOnClose } from './linger.js';
import { JSON_CONTENT_TYPE, PLAIN_HTTP_SECURITY_HEADERS } from './security-headers.js';
import { traceIdFrom } from './trace.js';

/** `currency`: the routing file's, named by the refusal's envelope as by every other. */
export function plainHttpHandler(app: RequestListener, trustProxy: boolean, logger: Logger, currency: () => string): RequestListener {
  return (req, res) => {
    if (trustProxy && forwardedHttps(req)) app(req, res);
    else refuse(req, res, logger, currency());
  };
}

/**
 * The last hop's value: a proxy that appends (`client-said, https`) is the one we trust, and a
 * proxy that overwrites leaves one value. Anything a client wrote before it is ignored.
 */
function forwardedHttps(req: IncomingMessage): boolean {
  const values = req.headersDistinct['x-forwarded-proto'] ?? [];
  const last = values.join(',').split(',').pop();
  return last?.trim().toLowerCase() === 'https';
}

function refuse(req: IncomingMessage, res: ServerResponse, logger: Logger, currency: string): void {
  const started = performance.now();
  const traceparent = req.headersDistinct.traceparent;
  const traceId = traceIdFrom(traceparent?.length === 1 ? traceparent[0] : undefined);
  const body = JSON.stringify(noLeadEnvelope('HTTPS_REQUIRED', traceId, currency));
  // An unread body stays on the wire; closing beats draining it, once the client has had a moment to stop sending.
  if (!req.complete) lingerOnClose(req.socket);
  res.writeHead(403, {
    'Content-Type': JSON_CONTENT_TYPE,
    'Content-Length': Buffer.byteLength(body),
    'X-Trace-Id': traceId,
    ...PLAIN_HTTP_SECURITY_HEADERS,
    ...(req.complete ? {} : { Connection: 'close' }),
  });
  res.end(req.method === 'HEAD' ? undefined : body);
  logAccess(logger, { traceId, method: req.method, route: null, status: 403, started, keyId: null });
}
