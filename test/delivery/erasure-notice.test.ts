import { expect } from 'chai';
import { RetentionSweeper } from '../../src/commands/retention.js';
import { verifyDelivery } from '../../src/delivery/signature.js';
import { BuyerEndpoint, type ReceivedDelivery } from './buyer-endpoint.js';
import { DeliveryHarness, SECRET_ENV, until } from './harness.js';
import type { AttemptReport } from '../../src/delivery/deliver-lead.js';
import { EventStoreUnavailableError } from '../../src/event-store/port.js';
import { overriding } from '../support/overriding.js';

// After an erasure, a webhook buyer that received the lead gets a signed {"type":"lead.erased",
// "lead_id", "reason"} notice, recorded and retried like a delivery; a delivery not made yet is
// never made. Retention (PII_RETENTION_DAYS) sends the same notice, with reason "retention".

const SECRET = 'notice-secret-7f3a';

describe('erasure and webhook buyers', function () {
  this.timeout(60_000);
  let endpoint: BuyerEndpoint;
  let harness: DeliveryHarness;
  // The first notice of each lead is answered 503, the next ones 200: the notice is retried. (Per
  // lead: retention also notifies for the leads sold as controls by the tests before it.)
  const refusedOnce = new Set<unknown>();
  const notices = () => endpoint.received.filter((r) => r.body.type === 'lead.erased');

  before(async function () {
    process.env[SECRET_ENV] = SECRET;
    endpoint = await BuyerEndpoint.start((request: ReceivedDelivery) => {
      if (request.body.type === 'lead.erased' && !refusedOnce.has(request.body.lead_id)) {
        refusedOnce.add(request.body.lead_id);
        return 503;
      }
      return 200;
    });
    harness = await DeliveryHarness.start(endpoint, { secret_env: SECRET_ENV });
  });

  after(async function () {
    await harness?.stop();
    await endpoint?.stop();
    delete process.env[SECRET_ENV];
  });

  it('the buyer that received the lead gets a signed lead.erased notice, retried until it takes it, recorded on the lead', async function () {
    harness.worker();
    const admin = await harness.svc.key('admin', 'root');
    const { leadId, lead } = await harness.sell({ zip: '90210' });
    await harness.rowWith(leadId, 'delivered');
    const erased = await harness.svc.post({ email: lead.email }, { 'x-api-key': admin }, '/functions/erasures');
    expect(erased.status, erased.text).to.equal(201);
    await until(async () => (await harness.ofType(leadId, 'ErasureNoticeSent')).length === 1, 10_000, () => JSON.stringify(notices().map((n) => n.text)));
    const sent = notices().filter((n) => n.body.lead_id === leadId);
    expect(sent).to.have.length(2);
    for (const notice of sent) {
      expect(JSON.parse(notice.text)).to.deep.equal({ type: 'lead.erased', lead_id: leadId, reason: 'consumer_request' });
      expect(notice.headers['idempotency-key']).to.equal(`lead-erased-${leadId}`);
      const timestamp = notice.headers['x-leadpost-timestamp'] as string;
      expect(verifyDelivery(SECRET, timestamp, notice.text, notice.headers['x-leadpost-signature'] as string)).to.equal(true);
    }
    const failed = await harness.ofType<{ attempt: number; status: number }>(leadId, 'ErasureNoticeFailed');
    expect(failed.map((f) => [f.attempt, f.status])).to.deep.equal([[1, 503]]);
    expect(await harness.ofType(leadId, 'ErasureNoticeSent')).to.have.length(1).and.to.have.nested.property('[0].attempt', 2);
    // Once taken, never sent again: checked once the row says so and the worker has settled a later lead.
    await until(async () => (await harness.row(leadId))?.notice === 'sent', 10_000, () => 'the notice sent in the deliveries row');
    await harness.laterLeadSettled();
    expect(notices().filter((n) => n.body.lead_id === leadId)).to.have.length(2);
    expect(await harness.row(leadId)).to.include({ notice: 'sent', status: 'delivered', erased: true });
  });

  it('a webhook delivery not made yet is cancelled, never sent; its buyer gets no notice', async function () {
    await harness.stopWorkers();
    const admin = await harness.svc.key('admin', 'root-2');
    const { leadId, lead } = await harness.sell({ zip: '90210' });
    const erased = await harness.svc.post({ mobile: lead.mobile }, { 'x-api-key': admin }, '/functions/erasures');
    expect(erased.status, erased.text).to.equal(201);
    await harness.rowWith(leadId, 'cancelled');
    harness.worker();
    // A lead sold later and delivered: the worker has polled past the cancelled one.
    await harness.laterLeadSettled();
    expect(endpoint.forLead(leadId)).to.deep.equal([]);
    expect((await harness.events(leadId)).map((e) => e.type)).to.include.members(['LeadPersonalDataErased', 'LeadDeliveryCancelled']).and.not.include('LeadDeliveryAttempted');
  });

  it('retention: the buyer that received an expired lead gets the signed lead.erased notice (reason retention), retried; pending deliveries are cancelled', async function () {
    await harness.stopWorkers();
    // The service's own clock is the real one; the sweep and the worker run 31 days later.
    const later = () => new Date(Date.now() + 31 * 86_400_000);
    harness.worker();
    const delivered = await harness.sell({ zip: '90210' });
    await harness.rowWith(delivered.leadId, 'delivered');
    await harness.stopWorkers();
    const pendingHook = await harness.sell({ zip: '90210' });
    const pendingPull = await harness.sell({ zip: '10001' });
    const { service } = harness.svc;
    await service.projections.waitFor(await service.store.headPosition());

    const sweeper = new RetentionSweeper({
      store: service.store,
      keys: service.personalData,
      readModels: service.readModels,
      leads: () => service.projections.collection('leads'),
      days: 30,
      now: later,
    });
    await sweeper.sweep();
    for (const { leadId } of [delivered, pendingHook, pendingPull]) expect(await harness.ofType(leadId, 'LeadPersonalDataExpired'), `lead ${leadId}`).to.have.length(1);
    expect((await harness.ofType(delivered.leadId, 'LeadPersonalDataExpired'))[0]).to.include({ notify_buyer: 'hook-buyer' });

    harness.worker({ now: later });
    await until(async () => (await harness.ofType(delivered.leadId, 'ErasureNoticeSent')).length === 1, 10_000, () => JSON.stringify(notices().map((n) => n.text)));
    const sent = notices().filter((n) => n.body.lead_id === delivered.leadId);
    expect(sent).to.have.length(2);
    for (const notice of sent) {
      expect(JSON.parse(notice.text)).to.deep.equal({ type: 'lead.erased', lead_id: delivered.leadId, reason: 'retention' });
      expect(notice.headers['idempotency-key']).to.equal(`lead-erased-${delivered.leadId}`);
      expect(verifyDelivery(SECRET, notice.headers['x-leadpost-timestamp'] as string, notice.text, notice.headers['x-leadpost-signature'] as string)).to.equal(true);
    }
    const failed = await harness.ofType<{ attempt: number; status: number }>(delivered.leadId, 'ErasureNoticeFailed');
    expect(failed.map((f) => [f.attempt, f.status])).to.deep.equal([[1, 503]]);
    await until(async () => (await harness.row(delivered.leadId))?.notice === 'sent', 10_000, () => 'the notice sent in the deliveries row');
    expect(await harness.row(delivered.leadId)).to.include({ status: 'delivered', notice: 'sent', erased: true });

    // Deliveries not made yet are cancelled (webhook and pull alike), never sent, and notify no one.
    for (const { leadId } of [pendingHook, pendingPull]) {
      expect(await harness.ofType(leadId, 'LeadDeliveryCancelled')).to.have.length(1).and.to.have.nested.property('[0].reason', 'expired');
      expect(await harness.rowWith(leadId, 'cancelled')).to.not.have.property('notice');
    }
    expect(endpoint.forLead(pendingHook.leadId)).to.deep.equal([]);
    expect((await harness.events(pendingHook.leadId)).map((e) => e.type)).to.not.include('LeadDeliveryAttempted');
  });
});

describe('erasure while a webhook delivery is in flight', function () {
  this.timeout(60_000);
  let endpoint: BuyerEndpoint;
  let harness: DeliveryHarness;
  /** While set, the buyer takes a lead and answers it with `status` only once released (within its timeout). */
  let hold: { readonly status: number; posted: boolean; readonly answered: Promise<void>; release(): void } | null = null;
  const holdNext = (status: number) => {
    let release = () => {};
    const answered = new Promise<void>((resolve) => (release = resolve));
    hold = { status, posted: false, answered, release };
    return hold;
  };

  before(async function () {
    endpoint = await BuyerEndpoint.start(async (request: ReceivedDelivery) => {
      const held = hold;
      if (request.body.type === 'lead.erased' || !held) return 200;
      held.posted = true;
      await held.answered;
      return held.status;
    });
    harness = await DeliveryHarness.start(endpoint, { timeout_ms: 10_000 });
    harness.worker();
  });

  after(async function () {
    hold?.release();
    await harness?.stop();
    await endpoint?.stop();
  });

  it('the buyer answering then gets the lead.erased notice once the attempt is over, never before: it holds the lead whatever the attempt comes to', async function () {
    const admin = { 'x-api-key': await harness.svc.key('admin', 'root') };
    // Another consumer's lead, delivered: its notice shows the worker sending notices meanwhile.
    const other = await harness.sell({ zip: '90210' });
    await harness.rowWith(other.leadId, 'delivered');
    const held = holdNext(200);
    const { leadId, lead } = await harness.sell({ zip: '90210' });
    await until(() => held.posted, 10_000, () => 'the delivery POST');
    for (const email of [lead.email, other.lead.email]) {
      const erased = await harness.svc.post({ email }, admin, '/functions/erasures');
      expect(erased.status, erased.text).to.equal(201);
    }
    expect((await harness.ofType(leadId, 'LeadPersonalDataErased'))[0]).to.include({ notify_buyer: 'hook-buyer' });
    await until(async () => (await harness.ofType(other.leadId, 'ErasureNoticeSent')).length === 1, 10_000, () => "the other lead's notice");
    // Told to delete a lead it has not finished receiving, the buyer would find nothing, then keep what arrives.
    expect(endpoint.forLead(leadId).filter((r) => r.body.type === 'lead.erased'), 'a notice while the lead is on its way').to.deep.equal([]);
    // Held a while each time it is found waiting, not logged at every poll (25 ms) while it waits.
    const noticeLines = () => harness.logs.filter((line) => line.includes('lead.erased notice') && line.includes(`"lead_id":${leadId}`));
    expect(noticeLines()).to.deep.equal([]);
    held.release();
    await until(async () => (await harness.ofType(leadId, 'ErasureNoticeSent')).length === 1, 10_000, () => 'the notice');
    const notices = endpoint.forLead(leadId).filter((r) => r.body.type === 'lead.erased');
    expect(notices.map((n) => JSON.parse(n.text))).to.deep.equal([{ type: 'lead.erased', lead_id: leadId, reason: 'consumer_request' }]);
    const types = (await harness.events(leadId)).map((e) => e.type);
    expect(types.indexOf('LeadDelivered'), types.join(', ')).to.be.below(types.indexOf('ErasureNoticeSent'));
    await until(() => noticeLines().some((line) => line.includes('"outcome":"ErasureNoticeSent"')), 10_000, () => 'the notice logged');
  });

  it('an attempt that fails after its delivery was cancelled ends it: recorded with no next attempt, and the row and the view stay cancelled, never pending again', async function () {
    const admin = { 'x-api-key': await harness.svc.key('admin', 'root') };
    const held = holdNext(503);
    const { leadId, lead } = await harness.sell({ zip: '90210' });
    await until(() => held.posted, 10_000, () => 'the delivery POST');
    const erased = await harness.svc.post({ email: lead.email }, admin, '/functions/erasures');
    expect(erased.status, erased.text).to.equal(201);
    await harness.rowWith(leadId, 'cancelled');
    held.release();
    await until(async () => (await harness.ofType(leadId, 'LeadDeliveryFailed')).length === 1, 10_000, () => "the attempt's failure");
    expect((await harness.ofType(leadId, 'LeadDeliveryFailed'))[0]).to.include({ attempt: 1, error: 'http_5xx', next_attempt_at: null, cancelled: true });
    const settled = await harness.svc.service.store.headPosition();
    await harness.svc.service.projections.waitFor(settled);
    expect(await harness.row(leadId)).to.include({ status: 'cancelled', next_attempt_at: null, last_error: 'http_5xx' });
    const view = await harness.svc.request('GET', `/functions/leads/${leadId}`, admin);
    expect((view.body.lead as { delivery: unknown }).delivery).to.deep.equal({ status: 'cancelled', attempts: 1 });
    const pending = await harness.svc.request('GET', '/functions/deliveries?status=pending', admin);
    expect((pending.body.items as Array<{ lead_id: number }>).map((row) => row.lead_id)).to.not.include(leadId);
    // Nothing more is sent: the one POST of the lead, then its notice.
    expect(endpoint.forLead(leadId).filter((r) => r.body.type !== 'lead.erased')).to.have.length(1);
  });
});

describe('a lead whose erasure could not record its mark', function () {
  this.timeout(60_000);
  let endpoint: BuyerEndpoint;
  let harness: DeliveryHarness;
  // While set, the erasure's marks cannot be appended. It marks before it destroys keys, so it
  // stops with nothing done: no key destroyed here while another process's cache still opens the
  // lead for its delivery with no mark to stop it.
  let marksFail = false;

  before(async function () {
    endpoint = await BuyerEndpoint.start(() => 200);
    harness = await DeliveryHarness.start(endpoint, {}, undefined, {
      wrapStore: (store) =>
        overriding(store, {
          append: async (stream, events, options) => {
            if (marksFail && events.some((event) => event.type === 'LeadPersonalDataErased')) throw new EventStoreUnavailableError('marks refused');
            return store.append(stream, events, options);
          },
        }),
    });
  });

  after(async function () {
    await harness?.stop();
    await endpoint?.stop();
  });

  it('answers 503 with nothing erased (the lead whole, its key kept); asked again it marks the lead and the buyer that received it is told to delete it', async function () {
    const admin = { 'x-api-key': await harness.svc.key('admin', 'root') };
    const { leadId, lead } = await harness.sell({ zip: '90210' });
    marksFail = true;
    const cut = await harness.svc.post({ email: lead.email }, admin, '/functions/erasures');
    expect(cut.status, cut.text).to.equal(503);
    const [received] = await harness.events(leadId);
    const keyId = (received!.data as { lead: { pii: { key: string } } }).lead.pii.key;
    expect(await harness.svc.service.personalData.get(keyId), 'the key, kept').to.not.equal(null);
    // Nothing was erased: the delivery goes on, whole.
    harness.worker();
    await harness.rowWith(leadId, 'delivered');
    expect(endpoint.forLead(leadId).map((r) => r.body.type ?? 'lead')).to.deep.equal(['lead']);
    marksFail = false;
    const again = await harness.svc.post({ email: lead.email }, admin, '/functions/erasures');
    expect(again.status, again.text).to.equal(201);
    expect(await harness.svc.service.personalData.get(keyId), 'the key, destroyed').to.equal(null);
    await until(() => endpoint.forLead(leadId).some((r) => r.body.type === 'lead.erased'), 10_000, () => 'the lead.erased notice');
  });
});

describe('an erasure notice whose outcome cannot be recorded', function () {
  this.timeout(60_000);
  let endpoint: BuyerEndpoint;
  let harness: DeliveryHarness;

  before(async function () {
    endpoint = await BuyerEndpoint.start(() => 200);
    harness = await DeliveryHarness.start(endpoint);
  });

  after(async function () {
    await harness?.stop();
    await endpoint?.stop();
  });

  it('is sent again after a wait that grows, not at every poll, and recorded once the store takes it', async function () {
    harness.worker();
    const admin = await harness.svc.key('admin', 'root');
    const { leadId, lead } = await harness.sell({ zip: '90210' });
    await harness.rowWith(leadId, 'delivered');
    await harness.stopWorkers();
    const erased = await harness.svc.post({ email: lead.email }, { 'x-api-key': admin }, '/functions/erasures');
    expect(erased.status, erased.text).to.equal(201);
    await harness.rowWith(leadId, 'delivered');
    await until(async () => (await harness.row(leadId))?.notice === 'pending', 10_000, () => 'the notice due');
    // The store refuses the records of the first two notices (a disk full, say) while the buyer
    // takes every notice; the third is recorded.
    const { store } = harness.svc.service;
    const sentAt = () => endpoint.forLead(leadId).filter((r) => r.body.type === 'lead.erased').map((r) => r.at);
    const events = overriding(store, {
      append: (name, appended, options) =>
        sentAt().length < 3 && appended.some((e) => e.type.startsWith('ErasureNotice')) ? Promise.reject(new EventStoreUnavailableError('disk full')) : store.append(name, appended, options),
    });
    harness.worker({ events });
    await until(async () => (await harness.ofType(leadId, 'ErasureNoticeSent')).length === 1, 15_000, () => `the notice recorded (sent at ${JSON.stringify(sentAt())})`);
    // The worker polls every 25 ms: sent at every poll, each notice would follow the one before
    // within some 50 ms. The gaps are read off the buyer's clock, so a slow machine only widens them.
    const [first, second, third] = sentAt();
    expect(sentAt(), 'notices sent').to.have.length(3);
    expect(second! - first!, 'ms before the second notice').to.be.at.least(900);
    expect(third! - second!, 'ms before the third notice (the wait grows)').to.be.at.least(1800);
  });
});

describe('erasure: a lead.erased notice that cannot be sent now, a service of its own each', function () {
  this.timeout(60_000);
  let endpoint: BuyerEndpoint | undefined;
  let harness: DeliveryHarness | undefined;

  afterEach(async function () {
    await harness?.stop();
    await endpoint?.stop();
    harness = endpoint = undefined;
  });

  it("cut short by a stop, is recorded interrupted and due again, not counted in the buyer's max_attempts: the restarted worker sends it", async function () {
    let hangNotices = true;
    endpoint = await BuyerEndpoint.start((request) => (request.body.type === 'lead.erased' && hangNotices ? 'hang' : 200));
    // One attempt allowed: the cut notice is the buyer's last, and used to be given up for good.
    harness = await DeliveryHarness.start(endpoint, { max_attempts: 1, timeout_ms: 60_000 });
    harness.worker({ stopGraceMs: 200 });
    const admin = await harness.svc.key('admin', 'root-stop');
    const { leadId, lead } = await harness.sell({ zip: '90210' });
    await harness.rowWith(leadId, 'delivered');
    const erased = await harness.svc.post({ email: lead.email }, { 'x-api-key': admin }, '/functions/erasures');
    expect(erased.status, erased.text).to.equal(201);
    const noticesOf = () => endpoint!.received.filter((r) => r.body.type === 'lead.erased' && r.body.lead_id === leadId);
    await until(() => noticesOf().length === 1, 10_000, () => 'the notice POST');
    await harness.stopWorkers();
    const failed = await harness.ofType<{ attempt: number; interrupted?: boolean; next_attempt_at: string | null }>(leadId, 'ErasureNoticeFailed');
    expect(failed).to.have.length(1);
    expect(failed[0]).to.include({ attempt: 1, interrupted: true });
    expect(failed[0]!.next_attempt_at, 'due again').to.be.a('string');

    hangNotices = false;
    harness.worker();
    await until(async () => (await harness!.ofType(leadId, 'ErasureNoticeSent')).length === 1, 10_000, () => 'the notice sent after the restart');
    expect(await harness.ofType(leadId, 'ErasureNoticeSent')).to.have.nested.property('[0].attempt', 2);
    expect(noticesOf()).to.have.length(2);
  });

  it('owed to a buyer that takes no webhook now, fails for good at once (not_webhook), sending nothing, so it shows among the failed notices; sent again once the buyer is a webhook buyer again', async function () {
    endpoint = await BuyerEndpoint.start(() => 200);
    harness = await DeliveryHarness.start(endpoint);
    harness.worker();
    const admin = await harness.svc.key('admin', 'root-pull');
    const { leadId, lead } = await harness.sell({ zip: '90210' });
    await harness.rowWith(leadId, 'delivered');
    await harness.stopWorkers();

    // The buyer now pulls: a worker following that routing file has no webhook to send to.
    const webhook = harness.routing;
    const pulling = { ...webhook, buyers: webhook.buyers.map((b) => ({ ...b, delivery: { kind: 'pull' as const } })) } as typeof webhook;
    harness.worker({ routing: () => pulling });
    const erased = await harness.svc.post({ email: lead.email }, { 'x-api-key': admin }, '/functions/erasures');
    expect(erased.status, erased.text).to.equal(201);
    await until(async () => (await harness!.row(leadId))?.notice === 'failed', 10_000, () => 'the notice failed in the deliveries row');
    const failed = await harness.ofType<{ attempt: number; status: number | null; error: string; next_attempt_at: string | null }>(leadId, 'ErasureNoticeFailed');
    expect(failed).to.deep.equal([{ ...failed[0]!, attempt: 1, status: null, error: 'not_webhook', next_attempt_at: null }]);
    expect(endpoint.received.filter((r) => r.body.type === 'lead.erased')).to.deep.equal([]);

    // The buyer takes webhooks again: an admin sends the notice again, and it goes.
    await harness.stopWorkers();
    harness.worker();
    const again = await harness.svc.request('POST', `/functions/deliveries/${leadId}/redeliver`, { 'x-api-key': admin });
    expect(again.status, again.text).to.equal(202);
    await until(async () => (await harness!.ofType(leadId, 'ErasureNoticeSent')).length === 1, 10_000, () => 'the notice sent again');
    expect(endpoint.received.filter((r) => r.body.type === 'lead.erased' && r.body.lead_id === leadId)).to.have.length(1);
  });
});
