// Requests Node refuses before Koa sees them (oversized headers, malformed HTTP, header timeouts)
// still get a JSON envelope rather than Node's bare text, written straight to the socket because
// there is no request or response object at that point.

import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { noLeadEnvelope, type OutcomeCode } from './envelope.js';
import { JSON_CONTENT_TYPE, PLAIN_HTTP_SECURITY_HEADERS, SECURITY_HEADERS } from './security-headers.js';
import { newTraceId } from './trace.js';

interface Refusal {
  readonly status: number;
  readonly reason: string;
  readonly code: OutcomeCode;
  readonly message: string;
}

// The envelope has no code for these; the nearest existing code keeps clients' switch statements
// closed, and the message says what actually happened.
function refusalFor(code: string | undefined): Refusal {
  if (code === 'HPE_HEADER_OVERFLOW') {
    return { status: 431, reason: 'Request Header Fields Too Large', code: 'PAYLOAD_TOO_LARGE', message: 'The request headers are larger than the limit (16 KiB).' };
  }
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return { status: 408, reason: 'Request Timeout', code: 'MALFORMED_JSON', message: 'The request was not received in time.' };
  }
  return { status: 400, reason: 'Bad Request', code: 'MALFORMED_JSON', message: 'The request is not valid HTTP/1.1.' };
}

export function clientErrorHandler(logger: Logger, secure: boolean): (error: NodeJS.ErrnoException, socket: Socket) => void {
  return (error, socket) => {
    const traceId = newTraceId();
    logger.info({ trace_id: traceId, code: error.code ?? null }, 'client error');
    if (error.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const refusal = refusalFor(error.code);
    const body = JSON.stringify(noLeadEnvelope(refusal.code, traceId, { message: refusal.message }));
    const headers: Record<string, string | number> = {
      'Content-Type': JSON_CONTENT_TYPE,
      'Content-Length': Buffer.byteLength(body),
      'X-Trace-Id': traceId,
      ...(secure ? SECURITY_HEADERS : PLAIN_HTTP_SECURITY_HEADERS),
      Connection: 'close',
    };
    const head = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('');
    socket.end(`HTTP/1.1 ${refusal.status} ${refusal.reason}\r\n${head}\r\n${body}`);
  };
}
