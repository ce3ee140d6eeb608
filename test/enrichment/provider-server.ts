// A local stand-in for an external verification provider, on 127.0.0.1 and an ephemeral port.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;

export interface ProviderServer {
  readonly url: string;
  /** host:port, as the adapter reports it in `http:<host>`. */
  readonly host: string;
  /** Raw request bodies, in arrival order. */
  readonly bodies: string[];
  handle(handler: Handler): void;
  close(): Promise<void>;
}

export async function startProvider(): Promise<ProviderServer> {
  let handler: Handler = (_req, _body, res) => res.end();
  const bodies: string[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => { body += chunk; });
    req.on('end', () => {
      bodies.push(body);
      handler(req, body, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/verify`,
    host: `127.0.0.1:${port}`,
    handle: (h) => { handler = h; },
    bodies,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
