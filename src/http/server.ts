// The listeners: HTTPS serves the app, plain HTTP refuses (see plain-http.ts). Both get the same
// limits, so a slow or bloated client ties up neither for long.

import { createServer as createHttpServer, type RequestListener, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { Logger } from 'pino';
import { DEFAULT_TIMEOUTS, type Timeouts } from '../limits.js';
import { clientErrorHandler, connectHandler, countingAnswers, MAX_HEADER_BYTES, secured } from './client-error.js';
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
  /** Omitted: DEFAULT_TIMEOUTS. */
  readonly timeouts?: Timeouts;
  /** The body limit the app enforces; a client that asks first (100-continue) is refused before it sends more. */
  readonly bodyLimitBytes?: number;
  /** The routing file's currency, named by the envelopes the listeners answer themselves (as by the app's). */
  readonly currency: () => string;
}

export interface RunningServers {
  readonly httpsPort: number;
  readonly httpPort: number;
  /** Serves new TLS connections with this certificate and key; connections already open keep theirs. */
  setTls(tls: { readonly cert: string; readonly key: string }): void;
  /** Stops accepting at once; requests in flight get `graceMs` (default 10 s) to finish, then their connections are cut. */
  close(graceMs?: number): Promise<void>;
}

// Node enforces both timeouts only when it next sweeps its connections (every 30 s by default),
// which would let a slow client hold a socket up to 30 s past its deadline; sweep often enough
// that a deadline is kept to within a second.
function limits(timeouts: Timeouts) {
  return {
    maxHeaderSize: MAX_HEADER_BYTES,
    // The shell answers a missing Host with the envelope; Node's own 400 has an empty body.
    requireHostHeader: false,
    headersTimeout: timeouts.headersMs,
    requestTimeout: timeouts.requestMs,
    keepAliveTimeout: 5_000,
    connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(timeouts.headersMs / 4))),
  };
}

// In-flight requests get this long to finish on close (unless the caller says otherwise); then
// their connections are cut.
const CLOSE_GRACE_MS = 10_000;

/**
 * A client that sends `Expect: 100-continue` (curl does for bodies over 1 KiB) waits for leave to
 * send its body. With a declared length over the limit it is not given leave: the app answers 413
 * straight away and the client never streams into a connection that is about to close (which could
 * make it see a reset instead of the answer).
 */
function continueUnlessTooLarge(handle: RequestListener, bodyLimitBytes: number | undefined): RequestListener {
  return (req, res) => {
    const declared = Number(req.headers['content-length']);
    if (bodyLimitBytes === undefined || !(declared > bodyLimitBytes)) res.writeContinue();
    handle(req, res);
  };
}

export async function startServers(options: StartOptions): Promise<RunningServers> {
  const { app, tls, logger, trustProxy, currency } = options;
  const serve = app.callback();
  const handle = countingAnswers(serve);
  const settings = limits(options.timeouts ?? DEFAULT_TIMEOUTS);
  // The handshake comes before the headers and is held to their deadline, not to Node's 120 s.
  const https = createHttpsServer({ cert: tls.cert, key: tls.key, handshakeTimeout: settings.headersTimeout, ...settings }, handle);
  applyTimeouts(https, settings);
  // Connections still in their TLS handshake, by their peer's address and port: the one thing the
  // raw socket and the TLS socket made of it share in public. A stop ends them at once: they carry
  // no request yet, and Node's own closing never reaches them (they are no HTTP connection yet).
  const handshaking = new Map<string, Socket>();
  const peer = (socket: Socket) => `${socket.remoteAddress}:${socket.remotePort}`;
  https.on('connection', (raw: Socket) => {
    const key = peer(raw);
    handshaking.set(key, raw);
    raw.once('close', () => {
      if (handshaking.get(key) === raw) handshaking.delete(key);
    });
  });
  https.on('secureConnection', (socket: Socket) => {
    secured.add(socket);
    handshaking.delete(peer(socket));
  });
  const stopHttps = (graceMs: number) => {
    for (const raw of handshaking.values()) raw.destroy();
    handshaking.clear();
    return stop(https, graceMs);
  };
  https.on('clientError', clientErrorHandler(logger, true, currency));
  https.on('connect', connectHandler(logger, true, currency));
  // An Expect other than 100-continue would get Node's bare 417; RFC 9110 lets a server ignore it,
  // so the request is served like any other (and a bad one gets its envelope).
  https.on('checkExpectation', handle);
  https.on('checkContinue', continueUnlessTooLarge(handle, options.bodyLimitBytes));

  const plain = countingAnswers(plainHttpHandler(serve, trustProxy, logger, currency));
  const http = createHttpServer({ ...settings }, plain);
  applyTimeouts(http, settings);
  http.on('clientError', clientErrorHandler(logger, false, currency));
  http.on('connect', connectHandler(logger, false, currency));
  http.on('checkExpectation', plain);
  // The plain port reads no body at all: it answers HTTPS_REQUIRED without inviting one.
  http.on('checkContinue', plain);

  try {
    await listen(https, options.port, options.host);
    await listen(http, options.httpPort, options.host);
  } catch (error) {
    await Promise.all([stopHttps(CLOSE_GRACE_MS), stop(http, CLOSE_GRACE_MS)]);
    throw error;
  }
  let closing: Promise<void> | undefined;
  return {
    httpsPort: (https.address() as AddressInfo).port,
    httpPort: (http.address() as AddressInfo).port,
    setTls: (next) => https.setSecureContext({ cert: next.cert, key: next.key }),
    close: (graceMs = CLOSE_GRACE_MS) => (closing ??= Promise.all([stopHttps(graceMs), stop(http, graceMs)]).then(() => undefined)),
  };
}

// Also set as properties: the constructor options for these arrived in different Node minors.
function applyTimeouts(server: Server, given: ReturnType<typeof limits>): void {
  server.headersTimeout = given.headersTimeout;
  server.requestTimeout = given.requestTimeout;
  server.keepAliveTimeout = given.keepAliveTimeout;
  // Node drops the headers after the 1,000th without a word (a second X-API-KEY, a
  // Content-Encoding, an Idempotency-Key among them): the 16 KiB of maxHeaderSize bounds them instead.
  server.maxHeadersCount = 0;
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
