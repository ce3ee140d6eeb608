import { createHmac } from 'node:crypto';
import { expect } from 'chai';
import { overriding } from '../support/overriding.js';
import type { DeliveryWorkerDeps } from '../../src/delivery/webhook-worker.js';
import type { LeadDelivered, LeadDeliveryAttempted, LeadDeliveryFailed } from '../../src/events/lead-events.js';
import { CERT_URL, validLead } from '../support/service.js';
import { type Answer, BuyerEndpoint, type ReceivedDelivery } from './buyer-endpoint.js';
import { DeliveryHarness, HOOK_BUYER, SECRET_ENV, type WebhookOptions, until } from './harness.js';

// Webhook delivery against a real local HTTPS buyer endpoint and the real service: what the buyer
// receives, and what is recorded for each way the buyer can answer.

type Failed = LeadDeliveryFailed['data'];
type Delivered = LeadDelivered['data'];
type Attempted = LeadDeliveryAttempted['data'];

describe('delivery: webhook to a buyer endpoint', function () {
  const SECRET = 'whsec-test-6f1d2c';
  let endpoint: BuyerEndpoint | undefined;
  let harness: DeliveryHarness | undefined;

  before(() => {
    process.env[SECRET_ENV] = SECRET;
  });
  after(() => {
    delete process.env[SECRET_ENV];
  });
  afterEach(async () => {
    await harness?.stop();
    await endpoint?.stop();
    harness = endpoint = undefined;
  });

  async function setUp(answer: (request: ReceivedDelivery) => Answer, webhook: WebhookOptions = {}, worker: Partial<DeliveryWorkerDeps> = {}): Promise<DeliveryHarness> {
    endpoint = await BuyerEndpoint.start(answer);
    harness = await DeliveryHarness.start(endpoint, webhook);
    harness.worker(worker);
    return harness;
  }

  it('a healthy endpoint gets the lead once, as signed JSON, and the delivery is recorded', async () => {
    const h = await setUp(() => 200, { secret_env: SECRET_ENV });
    const { leadId, lead } = await h.sell();
    const row = await h.rowWith(leadId, 'delivered');
    expect(row).to.include({ buyer: HOOK_BUYER, attempts: 1, last_status_code: 200, last_error: null, next_attempt_at: null });

    const [request, ...more] = endpoint!.forLead(leadId);
    expect(more).to.have.length(0);
    const mobile = lead.mobile as string;
    expect(request!.body).to.deep.equal({
      lead_id: leadId,
      sid: 'src-1',
      s1: 'click-1',
      price: 31.25,
      currency: 'USD',
      lead: {
        first_name: 'Ada', last_name: 'Lovelace', email: lead.email, mobile, mobile_national: mobile.slice(2),
        zip: '90210', zip4: null, accident_state: 'CA', certificate_url: CERT_URL,
      },
    });
    const headers = request!.headers;
    expect(headers['content-type']).to.equal('application/json');
    expect(headers['idempotency-key']).to.equal(`lead-${leadId}`);
    const timestamp = headers['x-leadpost-timestamp'] as string;
    expect(Math.abs(Number(timestamp) - Date.now() / 1000)).to.be.below(60);
    // Checked the way a buyer would: over the raw bytes received, with the shared secret.
    const expected = `sha256=${createHmac('sha256', SECRET).update(`${timestamp}.${request!.text}`).digest('hex')}`;
    expect(headers['x-leadpost-signature']).to.equal(expected);

    const events = await h.events(leadId);
    expect(events.slice(-3).map((e) => e.type)).to.deep.equal(['LeadSold', 'LeadDeliveryAttempted', 'LeadDelivered']);
    const delivered = events.at(-1)!.data as Delivered;
    expect(delivered).to.include({ lead_id: leadId, buyer: HOOK_BUYER, via: 'webhook', attempt: 1, status: 200 });
    expect(delivered.latency_ms).to.be.a('number').within(0, 2000);
    // The worker's events belong to the sale: its trace, the post's correlation, the supplier.
    const saleTrace = events.at(-3)!.metadata.trace_id as string;
    for (const event of events.slice(-2)) {
      expect(event.metadata, event.type).to.include({ trace_id: saleTrace, schema: 1, supplier_id: 'sup-1', correlation_id: saleTrace, causation_id: `delivery:${leadId}` });
      expect(Date.parse(event.metadata.occurred_at as string), event.type).to.not.be.NaN;
    }

    // Nothing the consumer gave and no secret reaches the log.
    const log = h.logs.join('');
    expect(log).to.contain('lead delivered');
    for (const value of [lead.email, mobile, mobile.slice(2), 'Lovelace', SECRET]) expect(log).not.to.contain(value as string);
  });

  it('503 twice, then 200: retried with backoff and delivered on attempt 3', async () => {
    const h = await setUp((r) => (r.n <= 2 ? 503 : 200));
    const { leadId } = await h.sell();
    const row = await h.rowWith(leadId, 'delivered');
    expect(row).to.include({ attempts: 3, last_status_code: 200 });
    const failures = await h.ofType<Failed>(leadId, 'LeadDeliveryFailed');
    expect(failures.map((f) => [f.attempt, f.status, f.error])).to.deep.equal([[1, 503, 'http_5xx'], [2, 503, 'http_5xx']]);
    for (const failure of failures) expect(Date.parse(failure.next_attempt_at!)).to.be.greaterThan(Date.parse(failure.failed_at));
    expect((await h.ofType<Delivered>(leadId, 'LeadDelivered')).map((d) => d.attempt)).to.deep.equal([3]);
    expect(endpoint!.forLead(leadId)).to.have.length(3);
  });

  it('429 with Retry-After: 1, then 200: the second attempt waits the second the buyer asked for, and the lead is delivered', async () => {
    // The worker's clock runs ten times fast, so the buyer's second passes in a tenth of one; the
    // recorded times are the worker's, so they still show the whole second.
    const start = Date.now();
    const fast = () => new Date(start + (Date.now() - start) * 10);
    const h = await setUp((r) => (r.n === 1 ? { status: 429, headers: { 'Retry-After': '1' } } : 200), {}, { now: fast });
    const { leadId } = await h.sell();
    const row = await h.rowWith(leadId, 'delivered');
    expect(row).to.include({ attempts: 2, last_status_code: 200 });

    const [failure, ...more] = await h.ofType<Failed>(leadId, 'LeadDeliveryFailed');
    expect(more).to.have.length(0);
    expect(failure).to.include({ attempt: 1, status: 429, error: 'http_4xx' });
    // The buyer's wait, not the worker's 100 ms backoff.
    expect(Date.parse(failure!.next_attempt_at!) - Date.parse(failure!.failed_at)).to.equal(1000);
    const attempts = await h.ofType<Attempted>(leadId, 'LeadDeliveryAttempted');
    expect(attempts.map((a) => a.attempt)).to.deep.equal([1, 2]);
    expect(Date.parse(attempts[1]!.started_at) - Date.parse(failure!.failed_at)).to.be.at.least(1000);
    expect((await h.ofType<Delivered>(leadId, 'LeadDelivered')).map((d) => d.attempt)).to.deep.equal([2]);
    expect(endpoint!.forLead(leadId)).to.have.length(2);
  });

  it('an endpoint that hangs past timeout_ms: a timeout, then a retry that succeeds', async () => {
    const h = await setUp((r) => (r.n === 1 ? 'hang' : 200), { timeout_ms: 200 });
    const { leadId } = await h.sell();
    await h.rowWith(leadId, 'delivered');
    const [failure, ...more] = await h.ofType<Failed>(leadId, 'LeadDeliveryFailed');
    expect(more).to.have.length(0);
    expect(failure).to.include({ attempt: 1, status: null, error: 'timeout' });
    expect(failure!.latency_ms).to.be.within(190, 1000);
    expect((await h.ofType<Delivered>(leadId, 'LeadDelivered')).map((d) => d.attempt)).to.deep.equal([2]);
  });

  it('a lead that cannot be opened for a while (the key store unreachable) spends no attempt: it is sent on attempt 1 once it opens', async () => {
    endpoint = await BuyerEndpoint.start(() => 200);
    harness = await DeliveryHarness.start(endpoint);
    const { personalData } = harness.svc.service;
    let refusals = 3;
    const unreachable = overriding(personalData, {
      get: (id: string) => (refusals-- > 0 ? Promise.reject(new Error('the key store is unreachable')) : personalData.get(id)),
    });
    // An open claim would be judged lost 100 ms after its timeout: any claim left behind shows.
    harness.worker({ personalData: unreachable, lostAfterMs: 100 });
    const { leadId } = await harness.sell();
    await harness.rowWith(leadId, 'delivered');
    expect(refusals).to.be.below(0);
    expect(await harness.ofType(leadId, 'LeadDeliveryFailed')).to.deep.equal([]);
    expect((await harness.ofType<Delivered>(leadId, 'LeadDelivered')).map((d) => d.attempt)).to.deep.equal([1]);
    expect(endpoint.forLead(leadId)).to.have.length(1);
  });

  it("a worker stopping cuts a POST still unanswered short after its grace and records it interrupted, due again: not counted in the buyer's max_attempts, so a restart during its last attempt does not fail the lead", async () => {
    let answer: Answer = 'hang';
    endpoint = await BuyerEndpoint.start(() => answer);
    // One attempt allowed: the cut attempt is the buyer's last, and used to fail the lead for good.
    harness = await DeliveryHarness.start(endpoint, { timeout_ms: 60_000, max_attempts: 1 });
    harness.worker({ stopGraceMs: 200 });
    const { leadId } = await harness.sell();
    await until(() => endpoint!.forLead(leadId).length === 1, 10_000, () => 'the POST');
    await harness.stopWorkers();
    const failures = await harness.ofType<Failed>(leadId, 'LeadDeliveryFailed');
    expect(failures).to.have.length(1);
    expect(failures[0]).to.include({ attempt: 1, error: 'connection_error', interrupted: true });
    expect(failures[0]!.next_attempt_at, 'due again').to.be.a('string');
    // Pending, not failed: the row shows the interrupted attempt and when the next is due.
    await until(async () => (await harness!.row(leadId))?.next_attempt_at === failures[0]!.next_attempt_at, 10_000, () => 'the row due again');
    expect(await harness.row(leadId)).to.include({ status: 'pending', attempts: 1, last_error: 'connection_error' });

    // The restarted worker sends it again, as the buyer's one counted attempt: a 500 now fails it for good.
    answer = 500;
    harness.worker();
    const row = await harness.rowWith(leadId, 'failed');
    expect(row).to.include({ attempts: 2, last_status_code: 500, next_attempt_at: null });
    const after = await harness.ofType<Failed>(leadId, 'LeadDeliveryFailed');
    expect(after.map((f) => [f.attempt, f.interrupted ?? false, f.next_attempt_at === null])).to.deep.equal([
      [1, true, false],
      [2, false, true],
    ]);
    expect(endpoint.forLead(leadId)).to.have.length(2);
  });

  it('a 4xx is final: one request, never retried', async () => {
    const h = await setUp(() => 422);
    const { leadId } = await h.sell();
    const row = await h.rowWith(leadId, 'failed');
    expect(row).to.include({ attempts: 1, last_status_code: 422, last_error: 'http_4xx', next_attempt_at: null });
    await h.laterLeadSettled('failed');
    expect(endpoint!.forLead(leadId)).to.have.length(1);
    expect((await h.events(leadId)).filter((e) => e.type.startsWith('LeadDeliver')).map((e) => e.type)).to.deep.equal([
      'LeadDeliveryAttempted',
      'LeadDeliveryFailed',
    ]);
  });

  it('max_attempts exhausted: the last failure is final and nothing more is sent', async () => {
    const h = await setUp(() => 500, { max_attempts: 3 });
    const { leadId } = await h.sell();
    const row = await h.rowWith(leadId, 'failed');
    expect(row).to.include({ attempts: 3, last_error: 'http_5xx', next_attempt_at: null });
    const failures = await h.ofType<Failed>(leadId, 'LeadDeliveryFailed');
    expect(failures.map((f) => [f.attempt, f.next_attempt_at === null])).to.deep.equal([[1, false], [2, false], [3, true]]);
    await h.laterLeadSettled('failed');
    expect(endpoint!.forLead(leadId)).to.have.length(3);
  });

  it('connection refused is retried like a 5xx', async () => {
    // Port 1: nothing listens there. (A port freed by a stopped server can be handed to the next
    // server this test starts, which then answers 200.)
    const url = 'https://127.0.0.1:1/leads';
    const h = await setUp(() => 200, { url, max_attempts: 2 });
    const { leadId } = await h.sell();
    await h.rowWith(leadId, 'failed');
    const failures = await h.ofType<Failed>(leadId, 'LeadDeliveryFailed');
    expect(failures.map((f) => [f.attempt, f.error, f.status])).to.deep.equal([[1, 'connection_error', null], [2, 'connection_error', null]]);
  });

  it('test leads and leads of pull buyers are never posted', async () => {
    const h = await setUp(() => 200);
    const pulled = await h.sell({ zip: '10001' });
    const test = await h.post(validLead({ test: true }));
    expect(test.body).to.include({ sold: true });
    await h.laterLeadSettled();
    const testLeadId = test.body.lead_id as number;
    expect(endpoint!.received.map((r) => r.body.lead_id)).to.not.include.members([pulled.leadId, testLeadId]);
    expect(endpoint!.forLead(testLeadId)).to.have.length(0);
    expect(endpoint!.forLead(pulled.leadId)).to.have.length(0);
    expect(await h.row(pulled.leadId)).to.include({ status: 'pending', attempts: 0 });
    expect(await h.row(testLeadId)).to.equal(null);
    for (const leadId of [pulled.leadId, testLeadId]) {
      expect((await h.events(leadId)).filter((e) => e.type.startsWith('LeadDeliver'))).to.have.length(0);
    }
  });

  it('a buyer secret variable that is not set: sent unsigned, with a warning that names the variable only', async () => {
    const h = await setUp(() => 200, { secret_env: 'X_SECRET_NOT_SET' });
    const { leadId } = await h.sell();
    await h.rowWith(leadId, 'delivered');
    expect(endpoint!.forLead(leadId)[0]!.headers).to.not.have.property('x-leadpost-signature');
    expect(h.logs.join('')).to.contain('X_SECRET_NOT_SET');
  });
});
