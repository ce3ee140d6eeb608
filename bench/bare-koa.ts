import Koa from 'koa';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { loadOrCreateTls } from '../src/http/tls.js';
import { tempDir } from '../test/support/tmp.js';

// The limit the service is measured against (issue 6): Koa over HTTPS on this machine, parsing the
// same JSON body and answering 201, with nothing else. It runs in its own process, like the
// service, so that the load client does not share its event loop.

const dir = tempDir('bench-bare');
const tls = await loadOrCreateTls({ dataDir: dir.path });
const app = new Koa();
app.use(async (ctx) => {
  const chunks: Buffer[] = [];
  for await (const chunk of ctx.req) chunks.push(chunk as Buffer);
  const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
  ctx.status = 201;
  ctx.body = { ok: true, received: Object.keys(body).length };
});
const server = createServer({ cert: tls.cert, key: tls.key }, app.callback()).listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ https_port: (server.address() as AddressInfo).port })}\n`);
});
process.once('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
  dir.remove();
});
