// Requests Node refuses before Koa sees them (oversized headers, malformed HTTP, header timeouts)
// still get a JSON envelope rather than Node's bare text, written straight to the socket because
// there is no request or response object at that point.

import type { IncomingMessage, RequestListener } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { logAccess } from './access-log.js';
import { noLeadEnvelope, OUTCOMES, type OutcomeCode } from './envelope.js';
import { JSON_CONTENT_TYPE, PLAIN_HTTP_SECURITY_HEADERS, SECURITY_HEADERS } from './security-headers.js';
import { newTraceId } from './trace.js';

/** Request headers larger than this are refused with 431 (the listeners' maxHeaderSize). */
export const MAX_HEADER_BYTES = 16 * 1024;

/** What the envelope says on a 431; the reference documentation shows the same. */
export const HEADERS_TOO_LARGE_MESSAGE = `The request headers are larger than the limit (${MAX_HEADER_BYTES / 1024} KiB).`;

interface Refusal {
  readonly status: number;
  readonly reason: string;
  readonly code: OutcomeCode;
  readonly message: string;
}

// Headers over the limit have no code of their own: the nearest one (too large) keeps clients'
// switch statements closed, and the message says which part was too large. A request that did not
// arrive in time is REQUEST_TIMEOUT, an `Error`: the same request sent faster may well succeed.
function refusalFor(code: string | undefined): Refusal {
  if (code === 'HPE_HEADER_OVERFLOW') {
    return { status: 431, reason: 'Request Header Fields Too Large', code: 'PAYLOAD_TOO_LARGE', message: HEADERS_TOO_LARGE_MESSAGE };
  }
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return { status: 408, reason: 'Request Timeout', code: 'REQUEST_TIMEOUT', message: OUTCOMES.REQUEST_TIMEOUT.message };
  }
  return { status: 400, reason: 'Bad Request', code: 'MALFORMED_JSON', message: 'The request is not valid HTTP/1.1.' };
}

/**
 * Sockets whose request ran out of time. Node answers the deadline here, then aborts the request a
 * route may still be reading; the body reader asks this set so that the request is logged and
 * counted as the timeout it was, not as a body that merely ended early.
 */
const timedOut = new WeakSet<Socket>();

export function requestTimedOut(socket: Socket | null | undefined): boolean {
  return socket !== null && socket !== undefined && timedOut.has(socket);
}

/**
 * The answers still being made on each socket. Bytes that follow a request on its connection (a
 * client that sent more than its Content-Length, or a pipelined request Node refuses) are refused
 * only after those answers: written at once, the refusal was the only answer the client read, while
 * the request before it, a lead, had been recorded and sold.
 */
const answering = new WeakMap<Socket, { readonly requests: Set<IncomingMessage>; then?: () => void }>();

/** The request listener, keeping the requests being answered on each socket for clientErrorHandler. */
export function countingAnswers(handle: RequestListener): RequestListener {
  return (req, res) => {
    const socket = req.socket;
    const open = answering.get(socket);
    if (open) open.requests.add(req);
    else answering.set(socket, { requests: new Set([req]) });
    // 'close' comes once the answer is written or the connection is gone, whichever is first.
    res.once('close', () => {
      const left = answering.get(socket);
      if (left && left.requests.delete(req) && left.requests.size === 0) {
        answering.delete(socket);
        left.then?.();
      }
    });
    handle(req, res);
  };
}

/**
 * Whether the bytes Node refused follow the requests being answered on the socket: each of those
 * has its whole body. One still reading its body (a broken chunk) is the request the error is in,
 * and its answer would wait for a body that never comes: that one is refused at once.
 */
function afterAnswers(socket: Socket): { then?: () => void } | undefined {
  const open = answering.get(socket);
  if (!open) return undefined;
  for (const req of open.requests) if (!req.complete) return undefined;
  return open;
}

/** Writes a refusal envelope straight to the socket and closes it (there is no response object here). */
function refuseOnSocket(socket: Socket, refusal: Refusal, traceId: string, currency: string, secure: boolean, extra: Record<string, string> = {}): void {
  const body = JSON.stringify(noLeadEnvelope(refusal.code, traceId, currency, { message: refusal.message }));
  const headers: Record<string, string | number> = {
    'Content-Type': JSON_CONTENT_TYPE,
    'Content-Length': Buffer.byteLength(body),
    'X-Trace-Id': traceId,
    ...(secure ? SECURITY_HEADERS : PLAIN_HTTP_SECURITY_HEADERS),
    ...extra,
    Connection: 'close',
  };
  const head = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('');
  socket.end(`HTTP/1.1 ${refusal.status} ${refusal.reason}\r\n${head}\r\n${body}`);
}

/**
 * The HTTPS port's connections whose TLS handshake is done (see clientErrorHandler): the
 * listener's 'secureConnection' adds each.
 */
export const secured = new WeakSet<Socket>();

/**
 * `currency`: the routing file's, named by the envelope as by every other. On the HTTPS port,
 * Node reports a failed or timed-out TLS handshake here too, and leaves the socket to this
 * handler: no HTTP answer can reach a client with no TLS session (writing one would wait for ever,
 * holding the connection and the process's stop), so such a socket is destroyed, and the failure
 * (a scanner, a client that distrusts the self-signed certificate) logged as no error of ours.
 */
export function clientErrorHandler(logger: Logger, secure: boolean, currency: () => string): (error: NodeJS.ErrnoException, socket: Socket) => void {
  return (error, socket) => {
    if (secure && !secured.has(socket)) {
      logger.debug({ code: error.code ?? null }, 'TLS handshake failed');
      socket.destroy();
      return;
    }
    const traceId = newTraceId();
    if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') timedOut.add(socket);
    logger.info({ trace_id: traceId, code: error.code ?? null }, 'client error');
    if (error.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const refuse = () => {
      if (socket.writable) refuseOnSocket(socket, refusalFor(error.code), traceId, currency(), secure);
      else socket.destroy();
    };
    // A timeout is the request in progress itself, which is aborted: answered now. Anything else
    // came after the requests being answered, and is refused after them.
    const open = error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? undefined : afterAnswers(socket);
    if (open) open.then = refuse;
    else refuse();
  };
}

/**
 * A CONNECT request (a client taking the service for a proxy) is not a request Koa sees: Node hands
 * over the socket, and with no listener closes it without a word. It is answered as any other
 * method a route does not take (the plain port: as every request there, HTTPS_REQUIRED).
 */
export function connectHandler(logger: Logger, secure: boolean, currency: () => string): (req: IncomingMessage, socket: Socket) => void {
  return (req, socket) => {
    const started = performance.now();
    const traceId = newTraceId();
    const refusal: Refusal = secure
      ? { status: 405, reason: 'Method Not Allowed', code: 'METHOD_NOT_ALLOWED', message: OUTCOMES.METHOD_NOT_ALLOWED.message }
      : { status: 403, reason: 'Forbidden', code: 'HTTPS_REQUIRED', message: OUTCOMES.HTTPS_REQUIRED.message };
    logAccess(logger, { traceId, method: req.method, route: null, status: refusal.status, started, keyId: null });
    // Allow names the methods the service serves on any route: CONNECT names a host, not one of them.
    refuseOnSocket(socket, refusal, traceId, currency(), secure, secure ? { Allow: 'GET, HEAD, POST' } : {});
  };
}
