import { expect } from 'chai';
import { BuyerEndpoint } from '../delivery/buyer-endpoint.js';
import { TestService, validLead } from '../support/service.js';
import { tempDir } from '../support/tmp.js';

// A delivery row says how its lead reaches its target (delivery_kind, in the routing file's words):
// the service POSTs it to a webhook buyer, a pull buyer lists and acknowledges it, a bucket's lead
// goes to no one. A delivered row keeps how it was delivered; any other row follows the buyer's
// delivery in the routing file in force, as the webhook worker and the acknowledgement route do.

type Row = { lead_id: number; buyer: string | null; bucket: string | null; status: string; delivery_kind: string | null };

const routingWith = (hook: Record<string, unknown>) => ({
  buyers: [
    { id: 'pull-buyer', price: 40, states: ['CA'] },
    { id: 'hook-buyer', price: 30, states: ['NV'], delivery: hook },
  ],
  buckets: [{ id: 'unsold', default: true }],
});

describe('GET /functions/deliveries: how each lead reaches its target', function () {
  this.timeout(60_000);
  const dir = tempDir('delivery-kind');
  let endpoint: BuyerEndpoint;
  let svc: TestService | undefined;
  const leads: Record<string, number> = {};
  const keys: Record<string, string> = {};

  before(async function () {
    endpoint = await BuyerEndpoint.start(() => 200);
    svc = await TestService.start({ dataDir: dir.path, buyerCa: endpoint.cert, routing: routingWith({ kind: 'webhook', url: endpoint.url, timeout_ms: 2000 }) });
    keys.supplier = await svc.key('supplier', 'sup-1');
    keys.admin = await svc.key('admin', 'root');
    keys.pullBuyer = await svc.key('buyer', 'pull-buyer');
    const post = async (name: string, lead: Record<string, unknown>) => {
      const reply = await svc!.post(lead, { 'x-api-key': keys.supplier! });
      expect(reply.status, reply.text).to.equal(201);
      leads[name] = reply.body.lead_id as number;
    };
    await post('pulled', validLead());
    await post('pending', validLead());
    await post('hooked', validLead({ accident_state: 'NV', zip: '89101' }));
    await post('bucket', validLead({ accident_state: 'TX', zip: '75001' }));
    const ack = await svc.request('POST', `/functions/deliveries/${leads.pulled}/ack`, { 'x-api-key': keys.pullBuyer! });
    expect(ack.status, ack.text).to.equal(200);
    await delivered(leads.hooked!);
  });
  after(async () => {
    await svc?.stop();
    await endpoint?.stop();
    dir.remove();
  });

  const rows = async (key = keys.admin!): Promise<Row[]> => {
    await svc!.service.projections.waitFor(await svc!.service.store.headPosition());
    const reply = await svc!.request('GET', '/functions/deliveries?limit=500', { 'x-api-key': key });
    expect(reply.status, reply.text).to.equal(200);
    return reply.body.items as Row[];
  };
  const kinds = async (key?: string) => Object.fromEntries((await rows(key)).map((row) => [row.lead_id, [row.status, row.delivery_kind]]));

  async function delivered(leadId: number): Promise<void> {
    for (const started = Date.now(); Date.now() - started < 20_000; await new Promise((resolve) => setTimeout(resolve, 50))) {
      if ((await rows()).some((row) => row.lead_id === leadId && row.status === 'delivered')) return;
    }
    throw new Error(`lead ${leadId} was not delivered`);
  }

  it("each row names its buyer's delivery, pull or webhook, pending or delivered; a bucket's row none", async function () {
    expect(await kinds()).to.deep.equal({
      [leads.pulled!]: ['delivered', 'pull'],
      [leads.pending!]: ['pending', 'pull'],
      [leads.hooked!]: ['delivered', 'webhook'],
      [leads.bucket!]: ['pending', null],
    });
    // The buyer reads the same of its own rows.
    expect(await kinds(keys.pullBuyer)).to.deep.equal({ [leads.pulled!]: ['delivered', 'pull'], [leads.pending!]: ['pending', 'pull'] });
  });

  it('after the routing file switches a buyer from webhook to pull: its delivered row still says webhook, a new sale says pull, and can be acknowledged', async function () {
    await svc!.stop();
    svc = undefined;
    svc = await TestService.start({ dataDir: dir.path, buyerCa: endpoint.cert, routing: routingWith({ kind: 'pull' }) });
    const hookBuyer = await svc.key('buyer', 'hook-buyer');
    const reply = await svc.post(validLead({ accident_state: 'NV', zip: '89101' }), { 'x-api-key': keys.supplier! });
    expect(reply.body, reply.text).to.include({ code: 'SOLD' });
    const sold = reply.body.lead_id as number;
    const now = await kinds();
    expect([now[leads.hooked!], now[sold]]).to.deep.equal([['delivered', 'webhook'], ['pending', 'pull']]);
    const ack = await svc.request('POST', `/functions/deliveries/${sold}/ack`, { 'x-api-key': hookBuyer });
    expect(ack.status, ack.text).to.equal(200);
    expect(endpoint.forLead(sold)).to.deep.equal([]);
  });
});

describe('GET /functions/deliveries: leads a webhook buyer failed, once it pulls', function () {
  this.timeout(60_000);
  const dir = tempDir('delivery-kind-switched');
  let endpoint: BuyerEndpoint;
  let svc: TestService | undefined;
  after(async () => {
    await svc?.stop();
    await endpoint?.stop();
    dir.remove();
  });

  it('a pending row shows no webhook failure and its created_at; a failed one re-opened is answered as the buyer\'s to pull', async function () {
    // A retry due later (503) for one lead, a final refusal (400) for the other.
    endpoint = await BuyerEndpoint.start((request) => (request.body.s1 === 'retry' ? 503 : 400));
    svc = await TestService.start({ dataDir: dir.path, buyerCa: endpoint.cert, routing: routingWith({ kind: 'webhook', url: endpoint.url, timeout_ms: 2000, max_attempts: 8 }) });
    const supplier = { 'x-api-key': await svc.key('supplier', 'sup-1') };
    const admin = { 'x-api-key': await svc.key('admin', 'root') };
    const sell = async (s1: string) => (await svc!.post(validLead({ accident_state: 'NV', zip: '89101', s1 }), supplier)).body.lead_id as number;
    const [retried, refused] = [await sell('retry'), await sell('refuse')];
    const row = async (leadId: number) => {
      await svc!.service.projections.waitFor(await svc!.service.store.headPosition());
      return ((await svc!.request('GET', '/functions/deliveries?limit=500', admin)).body.items as Array<Record<string, unknown>>).find((r) => r.lead_id === leadId)!;
    };
    for (const started = Date.now(); Date.now() - started < 20_000; await new Promise((resolve) => setTimeout(resolve, 50))) {
      if ((await row(retried)).last_error === 'http_5xx' && (await row(refused)).status === 'failed') break;
    }
    expect(await row(retried)).to.include({ status: 'pending', delivery_kind: 'webhook', last_error: 'http_5xx', last_status_code: 503 });

    await svc.stop();
    svc = await TestService.start({ dataDir: dir.path, buyerCa: endpoint.cert, routing: routingWith({ kind: 'pull' }) });
    const pending = await row(retried);
    expect(pending).to.include({ status: 'pending', delivery_kind: 'pull', last_error: null, last_status_code: null, next_attempt_at: pending.created_at });

    const reopened = await svc.request('POST', `/functions/deliveries/${refused}/redeliver`, { 'x-api-key': await svc.key('admin', 'root') });
    expect(reopened.status, reopened.text).to.equal(202);
    expect(reopened.body.message).to.match(/pulls its leads/);
    expect(reopened.body.delivery).to.include({ status: 'pending', delivery_kind: 'pull', last_error: null });
  });
});
