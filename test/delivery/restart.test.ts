import { expect } from 'chai';
import { Agent } from 'node:https';
import { rootCertificates } from 'node:tls';
import type { AttemptReport } from '../../src/delivery/deliver-lead.js';
import { deliverLead } from '../../src/delivery/deliver-lead.js';
import { LEAD_EVENT_SCHEMA, type LeadDeliveryAttempted, type LeadDelivered, type LeadDeliveryFailed, leadStream } from '../../src/events/lead-events.js';
import { PROJECTIONS } from '../../src/projections/index.js';
import { tempDir } from '../support/tmp.js';
import { BuyerEndpoint } from './buyer-endpoint.js';
import { DeliveryHarness, HOOK_BUYER, sleep, until } from './harness.js';

// Exactly one recorded delivery per lead across restarts, crashes mid-attempt and several
// workers on one store.

type Attempted = LeadDeliveryAttempted['data'];
type Failed = LeadDeliveryFailed['data'];
type Delivered = LeadDelivered['data'];

describe('delivery: restarts and several workers', function () {
  let endpoint: BuyerEndpoint | undefined;
  let harness: DeliveryHarness | undefined;

  afterEach(async () => {
    await harness?.stop();
    await endpoint?.stop();
    harness = endpoint = undefined;
  });

  /** One recorded success, and no attempt number claimed twice. */
  async function expectDeliveredOnce(h: DeliveryHarness, leadId: number): Promise<Delivered> {
    const delivered = await h.ofType<Delivered>(leadId, 'LeadDelivered');
    expect(delivered, `LeadDelivered of lead ${leadId}`).to.have.length(1);
    const claimed = (await h.ofType<Attempted>(leadId, 'LeadDeliveryAttempted')).map((a) => a.attempt);
    expect(new Set(claimed).size, `attempts claimed for lead ${leadId}: ${claimed.join(',')}`).to.equal(claimed.length);
    return delivered[0]!;
  }

  it('a service restart during retries: the pending retry survives, the lead is delivered once', async () => {
    const dir = tempDir('delivery-restart');
    try {
      endpoint = await BuyerEndpoint.start((r) => (r.n === 1 ? 503 : 200));
      const first = await DeliveryHarness.start(endpoint, {}, dir.path);
      harness = first;
      // A real first backoff, so the retry is still pending when the service goes down.
      first.worker({ backoff: () => 3000 });
      const { leadId } = await first.sell();
      await until(async () => (await first.row(leadId))?.last_status_code === 503);
      expect(await first.row(leadId)).to.include({ buyer: HOOK_BUYER, status: 'pending', attempts: 1, last_error: 'http_5xx' });
      await first.stop();
      harness = undefined;
      expect(endpoint.forLead(leadId)).to.have.length(1);

      const second = await DeliveryHarness.start(endpoint, {}, dir.path);
      harness = second;
      second.worker();
      const row = await second.rowWith(leadId, 'delivered');
      expect(row).to.include({ attempts: 2, last_status_code: 200 });
      await second.laterLeadSettled();
      expect(endpoint.forLead(leadId)).to.have.length(2);
      const delivered = await expectDeliveredOnce(second, leadId);
      expect(delivered.attempt).to.equal(2);
      const [failure] = await second.ofType<Failed>(leadId, 'LeadDeliveryFailed');
      // The restarted worker kept to the retry time the first one recorded.
      expect(Date.parse(delivered.delivered_at)).to.be.at.least(Date.parse(failure!.next_attempt_at!));
    } finally {
      await harness?.stop();
      harness = undefined;
      dir.remove();
    }
  });

  it('a worker stopped between attempts and another started: delivered once', async () => {
    endpoint = await BuyerEndpoint.start((r) => (r.n === 1 ? 503 : 200));
    const h = (harness = await DeliveryHarness.start(endpoint));
    const a = h.worker({ backoff: () => 1000 });
    const { leadId } = await h.sell();
    await until(() => endpoint!.forLead(leadId).length === 1);
    await a.stop();
    expect((await h.ofType<Failed>(leadId, 'LeadDeliveryFailed')).map((f) => f.status)).to.deep.equal([503]);
    h.worker();
    await h.rowWith(leadId, 'delivered');
    await h.laterLeadSettled();
    expect(endpoint.forLead(leadId).map((r) => r.n)).to.deep.equal([1, 2]);
    expect((await expectDeliveredOnce(h, leadId)).attempt).to.equal(2);
  });

  it('a worker that died mid-attempt: the claim is left alone while it could be in flight, then recorded lost and sent again', async () => {
    endpoint = await BuyerEndpoint.start(() => 200);
    const h = (harness = await DeliveryHarness.start(endpoint, { timeout_ms: 200 }));
    const { leadId } = await h.sell();
    // What a worker leaves behind when it dies right after its claim.
    const claimedAt = Date.now();
    const stream = await h.events(leadId);
    await h.svc.service.store.append(
      leadStream(leadId),
      [{ type: 'LeadDeliveryAttempted', data: { lead_id: leadId, buyer: HOOK_BUYER, attempt: 1, started_at: new Date(claimedAt).toISOString(), timeout_ms: 200 }, metadata: { schema: LEAD_EVENT_SCHEMA } }],
      { expectedRevision: stream.at(-1)!.revision },
    );
    h.worker({ lostAfterMs: 400 });
    await h.rowWith(leadId, 'delivered');
    const request = endpoint.forLead(leadId);
    expect(request).to.have.length(1);
    expect(Date.now() - claimedAt).to.be.at.least(600);
    const [lost] = await h.ofType<Failed>(leadId, 'LeadDeliveryFailed');
    expect(lost).to.include({ attempt: 1, error: 'attempt_lost', status: null });
    expect((await expectDeliveredOnce(h, leadId)).attempt).to.equal(2);
    expect(request[0]!.headers['idempotency-key']).to.equal(`lead-${leadId}`);
  });

  it('two attempts racing on one lead: one is sent, the other stands back', async () => {
    endpoint = await BuyerEndpoint.start(() => 200);
    const h = (harness = await DeliveryHarness.start(endpoint));
    const { leadId } = await h.sell();
    const agent = new Agent({ ca: [...rootCertificates, endpoint.cert] });
    const deps = {
      events: h.svc.service.store,
      personalData: h.svc.service.personalData,
      buyer: (id: string) => h.routing.buyers.find((b) => b.id === id),
      env: {},
      now: () => new Date(),
      backoff: () => 100,
      agent,
    };
    const reports = await Promise.all([deliverLead(deps, leadId), deliverLead(deps, leadId)]);
    agent.destroy();
    const kinds = reports.map((r) => (r.kind === 'skipped' ? r.reason : r.kind)).sort();
    expect(kinds[0]).to.be.oneOf(['claimed_elsewhere', 'in_flight']);
    expect(kinds[1]).to.equal('recorded');
    expect(endpoint.forLead(leadId)).to.have.length(1);
    await expectDeliveredOnce(h, leadId);
  });

  it('a pull acknowledgement that lands mid-attempt settles the lead: no second outcome is recorded', async () => {
    let h: DeliveryHarness | undefined;
    const reports: AttemptReport[] = [];
    endpoint = await BuyerEndpoint.start(async (request) => {
      // The buyer acknowledges through the pull route before its webhook answer goes out.
      const leadId = request.body.lead_id as number;
      const stream = await h!.events(leadId);
      const data: Delivered = { lead_id: leadId, buyer: HOOK_BUYER, via: 'pull', attempt: 2, status: null, latency_ms: null, delivered_at: new Date().toISOString() };
      await h!.svc.service.store.append(leadStream(leadId), [{ type: 'LeadDelivered', data }], { expectedRevision: stream.at(-1)!.revision });
      return 200;
    });
    h = harness = await DeliveryHarness.start(endpoint);
    h.worker({ onAttempt: (_id, report) => reports.push(report) });
    const { leadId } = await h.sell();
    await h.rowWith(leadId, 'delivered');
    await until(() => reports.length > 0);
    expect(reports[0]).to.deep.equal({ kind: 'superseded', attempt: 1 });
    expect((await h.ofType<Delivered>(leadId, 'LeadDelivered')).map((d) => d.via)).to.deep.equal(['pull']);
    expect(await h.ofType(leadId, 'LeadDeliveryFailed')).to.have.length(0);
    await h.laterLeadSettled();
    expect(endpoint.forLead(leadId)).to.have.length(1);
  });

  it('two workers on one store deliver each of 20 leads exactly once', async () => {
    endpoint = await BuyerEndpoint.start((r) => (r.n % 7 === 3 ? 503 : 200));
    const h = (harness = await DeliveryHarness.start(endpoint));
    const reports: AttemptReport[] = [];
    for (let i = 0; i < 2; i++) h.worker({ pollMs: 10, concurrency: 4, onAttempt: (_id, report) => reports.push(report) });
    const sold = await Promise.all(Array.from({ length: 20 }, () => h.sell()));
    for (const { leadId } of sold) await h.rowWith(leadId, 'delivered', 20_000);
    await h.laterLeadSettled();
    for (const { leadId } of sold) {
      await expectDeliveredOnce(h, leadId);
      const failures = (await h.ofType<Failed>(leadId, 'LeadDeliveryFailed')).length;
      // On the wire too: one request per recorded attempt, none sent twice.
      expect(endpoint.forLead(leadId)).to.have.length(failures + 1);
    }
    expect(reports.filter((r) => r.kind === 'superseded')).to.have.length(0);
    // Both polled the same rows: the stream, not luck, kept them apart.
    expect(reports.filter((r) => r.kind === 'skipped').length, 'attempts one worker left to the other').to.be.greaterThan(0);
  });

  // A delivery worker in a process of its own (`--roles delivery`) hears of no sale: no projection
  // in its process wakes it, and the projector that marks its deliveries done runs elsewhere, some
  // way behind. Between polls, only its own finished attempts start the next ones. A backlog of sold
  // leads must keep every slot busy all the same. Two things once stopped it: a page of rows it had
  // just delivered (still pending in the lagging read model) left it idle until the next poll; and
  // after a worker was killed, its open attempts, the oldest rows due, were tried again by every
  // freed slot, each found in flight elsewhere, round and round, while the rest of the backlog
  // waited (in a six-process test, the new worker drained about 130 leads a second, now about 390).
  describe('draining a backlog', function () {
    this.timeout(60_000);

    it('with no wake and no poll after the first, every slot stays busy until the backlog is delivered', async () => {
      const SLOTS = 8;
      const LEADS = 120;
      let answering = 0;
      let most = 0;
      endpoint = await BuyerEndpoint.start(async () => {
        answering += 1;
        most = Math.max(most, answering);
        // Long enough for several attempts to finish while the worker reads the next rows.
        await sleep(5);
        answering -= 1;
        return 200;
      });
      const h = (harness = await DeliveryHarness.start(endpoint));
      const sold: number[] = [];
      for (let i = 0; i < LEADS; i++) sold.push((await h.sell()).leadId);
      await until(async () => (await h.row(sold.at(-1)!))?.status === 'pending', 10_000, () => 'the last sale in the deliveries read model');
      // The projector stops: each delivered row stays pending, as one far behind would leave it, and
      // the oldest rows due are always the ones delivered. More rows than one page the worker reads
      // (100): the second page must be reached without a poll too.
      await Promise.all(PROJECTIONS.map((projection) => h.svc.service.projections.pause(projection.name)));
      h.worker({ pollMs: 3_600_000, concurrency: SLOTS });
      await until(() => endpoint!.received.length >= LEADS, 30_000, () => `${LEADS} deliveries, ${endpoint!.received.length} so far`);
      expect(new Set(endpoint.received.map((r) => r.body.lead_id))).to.deep.equal(new Set(sold));
      expect(most, 'requests the buyer had open at once').to.equal(SLOTS);
      // Recorded a moment after the buyer's answer: each lead's stream ends delivered, once.
      for (const leadId of sold) {
        await until(async () => (await h.events(leadId)).at(-1)?.type === 'LeadDelivered', 10_000, () => `lead ${leadId} recorded delivered`);
        expect(await h.ofType(leadId, 'LeadDelivered')).to.have.length(1);
      }
    });

    it('attempts a killed worker left open (the oldest rows due) do not take the slots: the rest of the backlog is delivered meanwhile', async () => {
      const SLOTS = 4;
      endpoint = await BuyerEndpoint.start(() => 200);
      const h = (harness = await DeliveryHarness.start(endpoint));
      const sold: number[] = [];
      for (let i = 0; i < 3 * SLOTS; i++) sold.push((await h.sell()).leadId);
      // What a worker killed mid-attempt leaves on the oldest leads: a claim with no outcome, which
      // counts as in flight elsewhere until it is taken for lost (half a minute after its time box).
      const open = sold.slice(0, SLOTS);
      for (const leadId of open) {
        const stream = await h.events(leadId);
        await h.svc.service.store.append(
          leadStream(leadId),
          [{ type: 'LeadDeliveryAttempted', data: { lead_id: leadId, buyer: HOOK_BUYER, attempt: 1, started_at: new Date().toISOString(), timeout_ms: 5000 }, metadata: { schema: LEAD_EVENT_SCHEMA } }],
          { expectedRevision: stream.at(-1)!.revision },
        );
      }
      // Every row in the read model first: with no poll, a row that came later would wait an hour.
      await until(async () => (await h.row(sold.at(-1)!))?.status === 'pending', 10_000, () => 'the last sale in the deliveries read model');
      h.worker({ pollMs: 3_600_000, concurrency: SLOTS });
      const rest = sold.slice(SLOTS);
      await until(() => rest.every((leadId) => endpoint!.forLead(leadId).length === 1), 20_000, () => `the ${rest.length} leads without an open attempt delivered, ${endpoint!.received.length} so far`);
      // The open ones wait for their claims to count as lost; none was sent meanwhile.
      for (const leadId of open) expect(endpoint.forLead(leadId), `lead ${leadId}`).to.have.length(0);
    });
  });
});
