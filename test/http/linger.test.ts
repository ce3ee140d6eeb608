import { expect } from 'chai';
import { connect as netConnect, type Socket } from 'node:net';
import { type ConnectionOptions, connect, type TLSSocket } from 'node:tls';
import { LINGER_MS } from '../../src/http/linger.js';
import { TestService } from '../support/service.js';

// A client that sends its body without asking first (no Expect: 100-continue: Node's and most
// languages' HTTP clients) is still sending when the service refuses the request before reading
// the body. The connection must stay open for it to finish, so that its writes do not fail and it
// reads the refusal, rather than being reset as soon as the refusal is written.

const BODY = 4 * 1024 * 1024;

interface Exchange {
  /** The bytes of the answer, as they arrived before the connection ended. */
  readonly answer: string;
  /** A write or read that failed (a reset), if any. */
  readonly error: string | null;
}

/**
 * Sends the head and a first slice of the body, waits until the whole answer has arrived, then
 * sends the rest of the body, as a client streaming a large body does, and ends its side.
 */
function streamAfterAnswer(port: number, head: string, plain = false): Promise<Exchange> {
  return new Promise((resolve) => {
    const socket: Socket | TLSSocket = plain ? netConnect({ host: '127.0.0.1', port }) : connect({ host: '127.0.0.1', port, rejectUnauthorized: false });
    let answer = '';
    let error: string | null = null;
    let restSent = false;
    socket.on('error', (e: NodeJS.ErrnoException) => (error ??= e.code ?? e.message));
    socket.on('close', () => resolve({ answer, error }));
    socket.on('data', (chunk: Buffer) => {
      answer += chunk.toString('latin1');
      const split = answer.indexOf('\r\n\r\n');
      const length = Number(/content-length: (\d+)/i.exec(answer)?.[1] ?? NaN);
      if (restSent || split < 0 || answer.length < split + 4 + length) return;
      // The whole answer is here: the client goes on sending, as it would before it looks at the answer.
      restSent = true;
      const slice = Buffer.alloc(64 * 1024, 0x20);
      let left = BODY - slice.length;
      const more = (): void => {
        while (left > 0 && !socket.destroyed) {
          left -= slice.length;
          if (!socket.write(slice)) return void socket.once('drain', more);
        }
        if (!socket.destroyed) socket.end();
      };
      more();
    });
    socket.once(plain ? 'connect' : 'secureConnect', () => socket.write(head + ' '.repeat(64 * 1024)));
  });
}

describe('HTTP: a refused request whose body is still arriving', function () {
  this.timeout(30_000);
  let svc: TestService;
  let key: string;

  before(async () => {
    svc = await TestService.start();
    key = await svc.key('supplier', 'sup-1');
  });
  after(async () => svc?.stop());

  const head = (headers: string) =>
    `POST /functions/leads HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: ${BODY}\r\n${headers}\r\n`;

  for (const [what, headers, status] of [
    ['no API key (401 before the body is read)', '', 401],
    ['a body over the limit (413 from its Content-Length)', `X-API-KEY: {key}\r\n`, 413],
  ] as const) {
    it(`${what}: the client finishes sending without a reset and has the answer`, async function () {
      const exchange = await streamAfterAnswer(svc.port, head(headers.replace('{key}', key)));
      expect(exchange.answer).to.match(new RegExp(`^HTTP/1.1 ${status} `));
      expect(exchange.answer).to.match(/\r\nconnection: close\r\n/i);
      expect(exchange.error, 'the client was reset while it sent the rest of its body').to.equal(null);
    });
  }

  it('plain HTTP (403 HTTPS_REQUIRED, no body read): the client finishes sending without a reset and has the answer', async function () {
    const exchange = await streamAfterAnswer(svc.service.httpPort, head(''), true);
    expect(exchange.answer).to.match(/^HTTP\/1.1 403 /);
    expect(exchange.answer).to.include('HTTPS_REQUIRED');
    expect(exchange.error, 'the client was reset while it sent the rest of its body').to.equal(null);
  });

  it(`closes a connection whose client keeps sending, ${LINGER_MS} ms after the answer`, async function () {
    this.timeout(LINGER_MS + 20_000);
    // Half-open: the service's end of the exchange does not end the client's, which trickles its body on.
    const options = { host: '127.0.0.1', port: svc.port, rejectUnauthorized: false, allowHalfOpen: true };
    const socket = connect(options as ConnectionOptions);
    socket.resume();
    await new Promise((resolve) => socket.once('secureConnect', resolve));
    const answered = new Promise<number>((resolve) => socket.once('data', () => resolve(Date.now())));
    const closed = new Promise<number>((resolve) => socket.once('error', () => resolve(Date.now())));
    socket.write(head(''));
    const trickle = setInterval(() => socket.write(' '), 50);
    try {
      const [answeredAt, closedAt] = [await answered, await closed];
      // Not cut at once (the bytes would have reset the client before it read the answer), nor held for good.
      expect(closedAt - answeredAt).to.be.at.least(LINGER_MS - 100);
    } finally {
      clearInterval(trickle);
      socket.destroy();
    }
  });
});
