// The listeners: HTTPS serves the app, plain HTTP refuses (see plain-http.ts). Both get the same
// limits, so a slow or bloated client ties up neither for long.

import { createServer as createHttpServer, type RequestListener, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { clientErrorHandler } from './client-error.js';
import { plainHttpHandler } from './plain-http.js';

export interface StartOptions {
  /** A Koa app of any state type: only its request callback is used. */
  readonly app: { callback(): RequestListener };
  readonly tls: { readonly cert: string; readonly key: string };
  readonly port: number;
  readonly httpPort: number;
  /** Omitted: every interface. */
  readonly host?: string;
  readonly trustProxy: boolean;
  readonly logger: Logger;
}

export interface RunningServers {
  readonly httpsPort: number;
  readonly httpPort: number;
  /** Stops accepting at once; requests in flight get `graceMs` (default 10 s) to finish, then their connections are cut. */
  close(graceMs?: number): Promise<void>;
}

const LIMITS = {
  maxHeaderSize: 16 * 1024,
  headersTimeout: 10_000,
  requestTimeout: 30_000,
  keepAliveTimeout: 5_000,
} as const;

// In-flight requests get this long to finish on close (unless the caller says otherwise); then
// their connections are cut.
const CLOSE_GRACE_MS = 10_000;

export async function startServers(options: StartOptions): Promise<RunningServers> {
  const { app, tls, logger, trustProxy } = options;
  const handle = app.callback();
  const https = createHttpsServer({ cert: tls.cert, key: tls.key, ...LIMITS }, handle);
  applyTimeouts(https);
  https.on('clientError', clientErrorHandler(logger, true));
  // A failed handshake (a scanner, a client that distrusts the self-signed cert) is not our error.
  https.on('tlsClientError', (error: NodeJS.ErrnoException) => logger.debug({ code: error.code ?? null }, 'TLS handshake failed'));

  const http = createHttpServer({ ...LIMITS }, plainHttpHandler(handle, trustProxy, logger));
  applyTimeouts(http);
  http.on('clientError', clientErrorHandler(logger, false));

  try {
    await listen(https, options.port, options.host);
    await listen(http, options.httpPort, options.host);
  } catch (error) {
    await Promise.all([stop(https, CLOSE_GRACE_MS), stop(http, CLOSE_GRACE_MS)]);
    throw error;
  }
  let closing: Promise<void> | undefined;
  return {
    httpsPort: (https.address() as AddressInfo).port,
    httpPort: (http.address() as AddressInfo).port,
    close: (graceMs = CLOSE_GRACE_MS) => (closing ??= Promise.all([stop(https, graceMs), stop(http, graceMs)]).then(() => undefined)),
  };
}

// Also set as properties: the constructor options for these arrived in different Node minors.
function applyTimeouts(server: Server): void {
  server.headersTimeout = LIMITS.headersTimeout;
  server.requestTimeout = LIMITS.requestTimeout;
  server.keepAliveTimeout = LIMITS.keepAliveTimeout;
}

function listen(server: Server, port: number, host: string | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    // Node's own text ("getaddrinfo ENOTFOUND x") does not say which setting to look at; the code stays for callers.
    const failed = (error: NodeJS.ErrnoException) =>
      reject(
        Object.assign(new Error(`cannot listen on ${host ?? 'every interface'}, port ${port} (${error.code ?? error.message}): check HOST, PORT and HTTP_PORT`, { cause: error }), {
          code: error.code,
        }),
      );
    server.once('error', failed);
    server.listen(port, host, () => {
      server.off('error', failed);
      resolve();
    });
  });
}

function stop(server: Server, graceMs: number): Promise<void> {
  if (!server.listening) return Promise.resolve();
  return new Promise((resolve) => {
    const force = setTimeout(() => server.closeAllConnections(), graceMs);
    force.unref();
    server.close(() => {
      clearTimeout(force);
      resolve();
    });
    server.closeIdleConnections();
  });
}
