import Koa from 'koa';
import { createHmac, randomBytes } from 'node:crypto';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { EmbeddedEventStore } from '../src/event-store/embedded/embedded-event-store.js';
import { loadOrCreateTls } from '../src/http/tls.js';
import { tempDir } from '../test/support/tmp.js';

// The limit the service is measured against: Koa over HTTPS on this machine, parsing the
// same JSON body and answering 201, with nothing else. It runs in its own process, like the
// service, so that the load client does not share its event loop.
//
// With BARE_DURABLE=1 it also makes, per request, the durable appends a sold post makes (as the
// service's metrics count them): two one-event contact claims, one after the other, then the
// lead's five events. That is the floor of any service that must
// record a post on disk before answering, on this machine and this store. The contact streams are
// named as the service names them, by a keyed hash (64 hex digits), so each claim starts a stream
// at a random place in the store's index of streams, as a real claim does: named in order, as
// they were before 2026-11-26, every claim landed on the index's last page, which made the
// writer's work per post half of what a dedupe by contact costs.
// With BARE_DURABLE=merged the same appends are made at once, so they share one group commit (one
// durable wait): what a sold post would cost if its claims and its lead were one atomic
// multi-stream append, the bound of that design.

const dir = tempDir('bench-bare');
const tls = await loadOrCreateTls({ dataDir: dir.path });
const merged = process.env.BARE_DURABLE === 'merged';
const durable = process.env.BARE_DURABLE === '1' || merged;
const store = durable ? await EmbeddedEventStore.open(dir.path) : undefined;
let nextLead = 1;
const secret = randomBytes(32);
const contactStream = (kind: string, leadId: number) => `contact-${createHmac('sha256', secret).update(`${kind}\n${leadId}`).digest('hex')}`;

async function record(lead: Record<string, unknown>): Promise<void> {
  if (!store) return;
  const leadId = nextLead++;
  const claimedAt = new Date().toISOString();
  const claim = { type: 'ContactClaimed', data: { lead_id: leadId, claimed_at: claimedAt } };
  const claims = ['mobile', 'email'].map((kind) => () => store.append(contactStream(kind, leadId), [claim], { expectedRevision: 'no_stream' }));
  const check = { result: 'pass', provider: 'bench', detail: 'ok' };
  const appendLead = () => store.append(
    `lead-${leadId}`,
    [
      { type: 'LeadReceived', data: { lead_id: leadId, supplier: 'bench', received_at: claimedAt, lead } },
      { type: 'LeadEnriched', data: { lead_id: leadId, phone: check, email: check, consent: check } },
      { type: 'LeadRouted', data: { lead_id: leadId, target: { kind: 'buyer', id: 'bench-buyer' }, price: 25, candidates: [{ buyer: 'bench-buyer', price: 25, eligible: true, reason: 'eligible' }] } },
      { type: 'LeadSold', data: { lead_id: leadId, buyer: 'bench-buyer', revenue: 25, currency: 'USD' } },
      { type: 'LeadAccepted', data: { lead_id: leadId, code: 'SOLD' } },
    ],
    { expectedRevision: 'no_stream' },
  );
  if (merged) {
    await Promise.all([...claims, appendLead].map((append) => append()));
    return;
  }
  for (const append of [...claims, appendLead]) await append();
}

const app = new Koa();
app.use(async (ctx) => {
  const chunks: Buffer[] = [];
  for await (const chunk of ctx.req) chunks.push(chunk as Buffer);
  const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
  await record(body);
  ctx.status = 201;
  ctx.body = { ok: true, received: Object.keys(body).length };
});
const server = createServer({ cert: tls.cert, key: tls.key }, app.callback()).listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ https_port: (server.address() as AddressInfo).port })}\n`);
});
process.once('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
  void (store?.close() ?? Promise.resolve()).finally(() => dir.remove());
});
