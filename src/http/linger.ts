// A connection answered before its request body was read (401 before the body, 413 past the limit,
// 415, HTTPS_REQUIRED) is closed, so that a stranger cannot stream a body into a keep-alive socket
// we would have to drain. Closing it at once is what Node does after the answer, and it loses the
// answer: bytes the client is still sending reach a socket that is gone, the kernel replies with a
// reset, and the client's next write fails — most clients then drop the connection and report
// "connection reset" without reading the 401 or 413 that was already on its way (RFC 9112 §9.6).
// So such a connection lingers: the answer is followed by our half of the close at once, and
// what the client still sends is read and dropped until it closes its half or LINGER_MS passes.

import type { Socket } from 'node:net';

/** Long enough for a client to notice the answer and stop sending; short enough to hold few sockets. */
export const LINGER_MS = 2_000;

/**
 * Makes Node's close of this connection after the answer a lingering one. Node's HTTP server ends a
 * `Connection: close` exchange by calling the socket's destroySoon(), which destroys the socket as
 * soon as our FIN is written; this socket's destroySoon ends it and lets the parser, which keeps
 * reading, discard the rest of the body until the client's FIN (which closes the socket) or the
 * deadline.
 */
export function lingerOnClose(socket: Socket): void {
  const lingering = socket as Socket & { destroySoon?: () => void; lingers?: true };
  if (lingering.lingers || typeof lingering.destroySoon !== 'function') return;
  lingering.lingers = true;
  lingering.destroySoon = function lingeringClose(this: Socket) {
    const deadline = setTimeout(() => this.destroy(), LINGER_MS);
    deadline.unref();
    this.once('close', () => clearTimeout(deadline));
    this.end();
  };
}
