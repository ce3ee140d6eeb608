import type { IncomingHttpHeaders } from 'node:http';
import { type Server, createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { loadOrCreateTls } from '../../src/http/tls.js';
import { tempDir } from '../support/tmp.js';

// A buyer's webhook endpoint: real HTTPS on 127.0.0.1 with a self-signed certificate, answering
// each request as the test scripts it and keeping every request it saw.

export interface ReceivedDelivery {
  readonly n: number;
  /** The request's path (and query). */
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly text: string;
  readonly body: Record<string, unknown>;
  /** performance.now() when the request was read. */
  readonly at: number;
  /** Whether it came on a connection an earlier request came on (a kept-alive one). */
  readonly reused: boolean;
}

/**
 * A status to answer with (and headers and a body to send along; the body defaults to `{}`), `hang`
 * to never answer, or `close` to close the connection without answering (as a server does that
 * closes a kept-alive connection for idling just as a request comes on it).
 */
export type Answer = number | { readonly status: number; readonly headers?: Record<string, string>; readonly body?: string } | 'hang' | 'close';

export interface BuyerEndpointOptions {
  /**
   * Leave a kept-alive connection open however long it idles, until the endpoint stops (Node's
   * server closes one idle for 5 s). A client that reuses a connection as the server closes it gets
   * ECONNRESET; on a loaded machine the server's timer and the next request can meet, and a test
   * that is not about that need not time its requests around it.
   */
  readonly keepIdleConnections?: boolean;
}

export class BuyerEndpoint {
  readonly received: ReceivedDelivery[] = [];

  private constructor(
    private readonly server: Server,
    readonly cert: string,
    private readonly removeDir: () => void,
    private readonly answer: (request: ReceivedDelivery) => Answer | Promise<Answer>,
  ) {}

  static async start(answer: (request: ReceivedDelivery) => Answer | Promise<Answer> = () => 200, options: BuyerEndpointOptions = {}): Promise<BuyerEndpoint> {
    const dir = tempDir('buyer-endpoint');
    const tls = await loadOrCreateTls({ dataDir: dir.path });
    let endpoint: BuyerEndpoint | undefined;
    const used = new WeakSet<object>();
    const server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
      const reused = used.has(req.socket);
      used.add(req.socket);
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', async () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const request: ReceivedDelivery = { n: endpoint!.received.length + 1, path: req.url ?? '', headers: req.headers, text, body: parse(text), at: performance.now(), reused };
        endpoint!.received.push(request);
        const answer = await endpoint!.answer(request);
        if (answer === 'hang') return;
        if (answer === 'close') return void req.socket.destroy();
        const { status, headers, body } = typeof answer === 'number' ? { status: answer, headers: {}, body: undefined } : answer;
        res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(body ?? '{}');
      });
    });
    if (options.keepIdleConnections) server.keepAliveTimeout = 0;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    endpoint = new BuyerEndpoint(server, tls.cert, dir.remove, answer);
    return endpoint;
  }

  get url(): string {
    return `https://127.0.0.1:${(this.server.address() as AddressInfo).port}/leads`;
  }

  /** Requests for one lead, in the order they came. */
  forLead(leadId: number): ReceivedDelivery[] {
    return this.received.filter((r) => r.body.lead_id === leadId);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.removeDir();
  }
}

function parse(text: string): Record<string, unknown> {
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch {
    return {};
  }
}
