import { expect } from 'chai';
import { type AppendResult, type EventData, EventStoreUnavailableError } from '../../src/event-store/port.js';
import { overriding } from '../support/overriding.js';
import { openApiDocument } from '../../src/docs/openapi.js';
import { MAY_BE_RECORDED_MESSAGE } from '../../src/http/shell.js';
import { DocumentReader } from '../support/openapi.js';
import { ALWAYS_OPEN_ROUTING, type Reply, TestService, validLead } from '../support/service.js';

// A server that takes a lead's append and never answers (EventStoreDB past its commit timeout, a
// channel cut after the request went out) may still write it later. The post is answered 503, but
// what it took must stay taken until its lead can no longer land: given back at once, a copy of
// the consumer would take its contacts and both leads be sold. (Its cap slot and ping stay taken
// the same way, given back with its claims or not at all.) An append the store refused for sure
// gives them back, so the supplier's retry is decided at once.

describe('post-lead: a lead whose append the store may still write', function () {
  this.timeout(30_000);
  let svc: TestService;
  let key: string;
  let clock = Date.now();
  /** How the next append to a lead's stream (or, with `cap`, to a cap's) fails: unanswered (it lands when `land` is called), refused, or not at all. */
  let next: 'unanswered' | 'written' | 'refused' | null = null;
  let streams = /^lead-\d+$/;
  /** The append held back, written when the test says the server got to it. */
  let held: (() => Promise<AppendResult>) | null = null;

  before(async () => {
    svc = await TestService.start({
      // A buyer of Texas leads with a cap: its sales append to the cap's stream first.
      // And a bidder on Nevada pings.
      routing: {
        ...ALWAYS_OPEN_ROUTING,
        buyers: [{ id: 'texas-law', price: 90, states: ['TX'], caps: [{ period: 'month', max: 1000 }] }, { id: 'nevada-bids', price: 70, states: ['NV'], ping: { kind: 'static' } }, ...ALWAYS_OPEN_ROUTING.buyers],
      },
      now: () => new Date(clock),
      wrapStore: (store) =>
        overriding(store, {
          append: (stream: string, events: readonly EventData[], options) => {
            if (!streams.test(stream) || next === null) return store.append(stream, events, options);
            const how = next;
            next = null;
            const error = new EventStoreUnavailableError(`injected: the append was ${how}`, { mayLandLater: how !== 'refused' });
            if (how === 'written') return store.append(stream, events, options).then(() => Promise.reject(error));
            if (how === 'unanswered') held = () => store.append(stream, events, options);
            return Promise.reject(error);
          },
        }),
    });
    key = await svc.key('supplier', 'sup-1');
  });
  after(() => svc.stop());

  async function land(): Promise<void> {
    await held!();
    held = null;
  }

  const sold = async (): Promise<number> => (await svc.service.store.readAll()).filter((event) => event.type === 'LeadSold').length;
  const codeOf = (reply: Reply) => [reply.status, reply.body.code];

  it('keeps its contact claims: a copy is told to retry, and once the lead lands, it is its duplicate', async function () {
    const body = validLead();
    const soldBefore = await sold();
    next = 'unanswered';
    const first = await svc.post(body, { 'x-api-key': key });
    expect(codeOf(first), first.text).to.deep.equal([503, 'UNAVAILABLE']);
    expect(first.body.message, 'not "nothing was recorded"').to.equal(MAY_BE_RECORDED_MESSAGE);
    const documented = new DocumentReader(await openApiDocument()).check('POST', '/functions/leads', 503, String(first.headers['content-type']), first.body, { messages: true });
    expect(documented, 'the answer as the OpenAPI document shows it').to.deep.equal([]);

    const copy = await svc.post(body, { 'x-api-key': key });
    expect(codeOf(copy), copy.text).to.deep.equal([409, 'DUPLICATE_PENDING']);

    await land();
    const after = await svc.post(body, { 'x-api-key': key });
    expect(codeOf(after), after.text).to.deep.equal([409, 'DUPLICATE']);
    expect(await sold(), 'the consumer is sold once').to.equal(soldBefore + 1);
  });

  it('keeps its Idempotency-Key in flight: a retry is told to wait, then gets the lead that landed', async function () {
    const body = JSON.stringify(validLead());
    next = 'unanswered';
    const first = await svc.post(body, { 'x-api-key': key, 'idempotency-key': 'may-land' });
    expect(first.status, first.text).to.equal(503);

    const soon = await svc.post(body, { 'x-api-key': key, 'idempotency-key': 'may-land' });
    expect(codeOf(soon), soon.text).to.deep.equal([409, 'IDEMPOTENCY_CONFLICT']);
    expect(Number(soon.headers['retry-after'])).to.be.greaterThan(0);

    await land();
    clock += 31_000;
    const retry = await svc.post(body, { 'x-api-key': key, 'idempotency-key': 'may-land' });
    expect(codeOf(retry), retry.text).to.deep.equal([201, 'SOLD']);
    expect(retry.headers['idempotency-replayed']).to.equal('true');
    const leads = (await svc.service.store.readAll()).filter((event) => event.type === 'LeadReceived' && (event.data as { lead_id: number }).lead_id === retry.body.lead_id);
    expect(leads, 'the lead that landed, not a second one').to.have.length(1);
  });

  it('an append refused for sure gives its claims back: the same post again is sold at once', async function () {
    const body = validLead();
    next = 'refused';
    const first = await svc.post(body, { 'x-api-key': key });
    expect(first.status, first.text).to.equal(503);
    expect(first.body.message).to.include('nothing was recorded');
    const again = await svc.post(body, { 'x-api-key': key });
    expect(codeOf(again), again.text).to.deep.equal([201, 'SOLD']);
  });

  for (const [what, appends, how] of [
    ["a cap's", /^cap-/, 'unanswered'],
    ["a contact claim's", /^contact-/, 'unanswered'],
    ["the Idempotency-Key claim's", /^idempotency-/, 'unanswered'],
    ["the Idempotency-Key claim's", /^idempotency-/, 'written'],
  ] as const) {
    it(`${what} append never answered (${how === 'written' ? 'written' : 'not written yet'}) leaves no lead: the claims go back and the key is free, nothing was recorded`, async function () {
      const body = JSON.stringify(validLead({ accident_state: 'TX', zip: '75001' }));
      const idempotencyKey = `cut-${how}-${appends.source}`;
      streams = appends;
      next = how;
      try {
        const first = await svc.post(body, { 'x-api-key': key, 'idempotency-key': idempotencyKey });
        expect(first.status, first.text).to.equal(503);
        expect(first.body.message).to.include('nothing was recorded');
      } finally {
        streams = /^lead-\d+$/;
        held = null;
      }
      const again = await svc.post(body, { 'x-api-key': key, 'idempotency-key': idempotencyKey });
      expect([...codeOf(again), again.body.revenue], again.text).to.deep.equal([201, 'SOLD', 90]);
      expect(again.headers['idempotency-replayed']).to.equal(undefined);
    });
  }

  it("a ping's append written but never answered is taken back: the supplier's retry sells at the bid, not PING_CONSUMED", async function () {
    const pinged = await svc.post({ zip: '89101', accident_state: 'NV', sid: 'src-1' }, { 'x-api-key': key }, '/functions/pings');
    expect(pinged.body, pinged.text).to.include({ code: 'BID', bid: 70 });
    const body = JSON.stringify(validLead({ accident_state: 'NV', zip: '89101', ping_id: pinged.body.ping_id }));
    streams = /^ping-[0-9a-f]{8}-/;
    next = 'written';
    try {
      const first = await svc.post(body, { 'x-api-key': key, 'idempotency-key': 'ping-cut' });
      expect(first.status, first.text).to.equal(503);
    } finally {
      streams = /^lead-\d+$/;
    }
    const again = await svc.post(body, { 'x-api-key': key, 'idempotency-key': 'ping-cut' });
    expect([...codeOf(again), again.body.revenue], again.text).to.deep.equal([201, 'SOLD', 70]);
  });
});
