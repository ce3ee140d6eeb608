import { expect } from 'chai';
import { LEAD_EVENT_SCHEMA, leadStream } from '../../src/events/lead-events.js';
import { BuyerEndpoint } from './buyer-endpoint.js';
import { DeliveryHarness, HOOK_BUYER, sleep, until } from './harness.js';

// A delivery worker in a process of its own (`--roles delivery`) hears of no sale: no projection
// in its process wakes it, and the projector that marks its deliveries done runs elsewhere, some
// way behind. Between polls, only its own finished attempts start the next ones. A backlog of sold
// leads must keep every slot busy all the same. Two things once stopped it: a page of rows it had
// just delivered (still pending in the lagging read model) left it idle until the next poll; and
// after a worker was killed, its open attempts, the oldest rows due, were tried again by every
// freed slot, each found in flight elsewhere, round and round, while the rest of the backlog
// waited (in a six-process test, the new worker drained about 130 leads a second, now about 390).

describe('delivery: draining a backlog', function () {
  this.timeout(60_000);
  let endpoint: BuyerEndpoint | undefined;
  let harness: DeliveryHarness | undefined;

  afterEach(async () => {
    await harness?.stop();
    await endpoint?.stop();
    harness = endpoint = undefined;
  });

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
    await h.svc.service.projections.pause();
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
    h.worker({ pollMs: 3_600_000, concurrency: SLOTS });
    const rest = sold.slice(SLOTS);
    await until(() => rest.every((leadId) => endpoint!.forLead(leadId).length === 1), 20_000, () => `the ${rest.length} leads without an open attempt delivered, ${endpoint!.received.length} so far`);
    // The open ones wait for their claims to count as lost; none was sent meanwhile.
    for (const leadId of open) expect(endpoint.forLead(leadId), `lead ${leadId}`).to.have.length(0);
  });
});

