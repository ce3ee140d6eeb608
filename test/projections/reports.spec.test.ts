import { expect } from 'chai';
import type { RejectionCode } from '../../src/events/lead-events.js';
import { reportsProjection } from '../../src/projections/projections.js';
import {
  type NewLeadEvent,
  apiKeyIssued,
  deliveryAttempted,
  deliveryFailed,
  feedbackRecorded,
  leadDelivered,
  leadReceived,
  leadRoutedToBuyer,
  rejectedLead,
  returned,
  soldLead,
  unsoldLead,
} from '../support/lead-events.js';
import { projectionSpec, recorded } from '../support/projection-spec.js';

// The report counters (`reports`, version 4): hourly buckets keyed by the UTC hour the lead was
// received and its supplier, sid, state, buyer and test flag, then the currency of the bucket's
// money (`report_buckets`), never by s1: a report by s1 sums the counters each lead's view carries
// (see leads.spec). Each spec states every bucket, whole; the projection has no other collection.

const spec = projectionSpec(reportsProjection);

const HOUR = '2026-11-20T15';

interface Dims {
  hour?: string;
  supplier?: string;
  sid?: string | null;
  state?: string | null;
  buyer?: string | null;
  test?: boolean;
  /** The currency of the bucket's money: USD (the events' own) when it counts money, else null. */
  currency?: string | null;
}

const dims = ({ hour = HOUR, supplier = 'sup-a', sid = 'sid-1', state = 'CA', buyer = null, test = false }: Dims = {}) => ({ hour, supplier, sid, state, buyer, test });

const MONEY = ['revenue_cents', 'returned_cents', 'bid_cents'];
const currencyOf = (d: Dims, counters: Record<string, number>) => (d.currency !== undefined ? d.currency : MONEY.some((c) => c in counters) ? 'USD' : null);

/** A bucket's id: its hour, then supplier, sid, state, buyer, test flag, currency; never s1. */
const bucketId = (d: Dims, currency: string | null) => {
  const { hour, supplier, sid, state, buyer, test } = dims(d);
  return JSON.stringify([hour, supplier, sid, state, buyer, test, currency]);
};

/** A bucket with its dimensions and counters. */
const bucket = (d: Dims, counters: Record<string, number>) => {
  const currency = currencyOf(d, counters);
  return { [bucketId(d, currency)]: { ...dims(d), currency, ...counters } };
};


const SOLD = { received: 1, accepted: 1, sold: 1 };
const UNSOLD = { received: 1, accepted: 1, unsold: 1 };

describe('reports projection (version 4)', function () {
  it('a sold lead: received, accepted, sold and its revenue in cents, in its hour and under its buyer', async function () {
    const counters = { ...SOLD, revenue_cents: 2500 };
    await spec.given(...soldLead(1, 'acme', 25)).then({
      report_buckets: bucket({ buyer: 'acme' }, counters),
    });
  });

  it("money of another currency goes to a bucket of its own, never added to the first (the routing file's currency changed)", async function () {
    const inEuros = soldLead(2, 'acme', 20).map((event) => ('currency' in event.data ? { ...event, data: { ...event.data, currency: 'EUR' } } : event)) as NewLeadEvent[];
    await spec.given(...soldLead(1, 'acme', 25), ...inEuros).then({
      report_buckets: { ...bucket({ buyer: 'acme' }, { ...SOLD, revenue_cents: 2500 }), ...bucket({ buyer: 'acme', currency: 'EUR' }, { ...SOLD, revenue_cents: 2000 }) },
    });
  });

  it('revenue is counted in whole cents, rounded', async function () {
    // 19.99 * 100 is 1998.9999999999998 in floating point.
    const counters = { ...SOLD, revenue_cents: 1999 };
    await spec.given(...soldLead(1, 'acme', 19.99)).then({
      report_buckets: bucket({ buyer: 'acme' }, counters),
    });
  });

  it('an unsold lead: received, accepted, unsold, under no buyer', async function () {
    await spec.given(...unsoldLead(1, 'unsold-ca')).then({
      report_buckets: bucket({}, UNSOLD),
    });
  });

  describe('rejections, each counted under its code', function () {
    it('INVALID: under the fields that passed validation (no state, no s1 here)', async function () {
      const counters = { received: 1, rejected: 1, rejected_INVALID: 1 };
      await spec.given(...rejectedLead(1, 'INVALID')).then({
        report_buckets: bucket({ state: null }, counters),
      });
    });

    for (const code of ['DUPLICATE', 'VERIFICATION_FAILED'] as RejectionCode[]) {
      it(code, async function () {
        const counters = { received: 1, rejected: 1, [`rejected_${code}`]: 1 };
        await spec.given(...rejectedLead(1, code)).then({
          report_buckets: bucket({}, counters),
        });
      });
    }
  });

  it('test leads are counted apart, flagged, never mixed with live ones', async function () {
    const live = { ...SOLD, revenue_cents: 2500 };
    const test = { ...SOLD, revenue_cents: 3000 };
    await spec.given(...soldLead(1, 'acme', 25), ...soldLead(2, 'acme', 30, { test: true, s1: 'click-2' })).then({
      report_buckets: { ...bucket({ buyer: 'acme' }, live), ...bucket({ buyer: 'acme', test: true }, test) },
    });
  });

  it('a ping post taken back (its lead was not recorded) takes its count back: the retry that sells is the one post counted', async function () {
    const source = { ping_id: 'p1', supplier: 'sup-a', sid: 'sid-1', accident_state: 'CA', test: false, pinged_at: '2026-11-20T15:01:00.000Z' };
    const ping = (type: string, data: Record<string, unknown>) => ({ streamId: 'ping-p1', type, data: { ...source, ...data }, metadata: { occurred_at: source.pinged_at } });
    await spec
      .given(
        ping('PingPosted', { lead_id: 7, buyer: 'acme', amount: 5, posted_at: '2026-11-20T15:02:00.000Z' }),
        ping('PingPostReleased', { lead_id: 7, buyer: 'acme', amount: 5, released_at: '2026-11-20T15:02:01.000Z' }),
        ping('PingPosted', { lead_id: 8, buyer: 'acme', amount: 5, posted_at: '2026-11-20T15:02:02.000Z' }),
      )
      .then({ report_buckets: bucket({ buyer: 'acme' }, { ping_posts: 1 }) });
  });

  describe('a return', function () {
    it("reverses the revenue in the sale's bucket, the sale still counted", async function () {
      const counters = { ...SOLD, revenue_cents: 2500, returned: 1, returned_cents: 2500 };
      await spec.given(...soldLead(1, 'acme', 25), ...returned(1, 'acme', 25, 'bad_phone', '2026-11-20T15:30:00.000Z')).then({
        report_buckets: bucket({ buyer: 'acme' }, counters),
      });
    });

    it('returned days later: still in the hour the lead was received, not the hour of the return', async function () {
      const sale = { ...SOLD, revenue_cents: 2500 };
      await spec
        .given(...soldLead(1, 'acme', 25), ...soldLead(2, 'acme', 25, { s1: 'click-2', received_at: '2026-11-23T09:00:00.000Z' }), ...returned(1, 'acme', 25, 'fraud', '2026-11-23T09:30:00.000Z'))
        .then({
          report_buckets: { ...bucket({ buyer: 'acme' }, { ...sale, returned: 1, returned_cents: 2500 }), ...bucket({ hour: '2026-11-23T09', buyer: 'acme' }, sale) },
        });
    });
  });

  it('leads of one hour and dimensions share a bucket, s1 apart; each other dimension makes its own bucket', async function () {
    const sold = (cents: number) => ({ ...SOLD, revenue_cents: cents });
    await spec
      .given(
        ...soldLead(1, 'acme', 25, { s1: 'click-1' }),
        ...soldLead(2, 'acme', 30, { s1: 'click-2', received_at: '2026-11-20T15:59:59.999Z' }),
        ...soldLead(3, 'acme', 25, { received_at: '2026-11-20T16:00:00.000Z' }),
        ...soldLead(4, 'acme', 25, { supplier: 'sup-b' }),
        ...soldLead(5, 'acme', 25, { sid: 'sid-2' }),
        ...soldLead(6, 'acme', 25, { accident_state: 'TX' }),
        ...soldLead(7, 'zenith', 25),
      )
      .then({
        report_buckets: {
          ...bucket({ buyer: 'acme' }, { received: 2, accepted: 2, sold: 2, revenue_cents: 5500 }),
          ...bucket({ hour: '2026-11-20T16', buyer: 'acme' }, sold(2500)),
          ...bucket({ supplier: 'sup-b', buyer: 'acme' }, sold(2500)),
          ...bucket({ sid: 'sid-2', buyer: 'acme' }, sold(2500)),
          ...bucket({ state: 'TX', buyer: 'acme' }, sold(2500)),
          ...bucket({ buyer: 'zenith' }, sold(2500)),
        },
      });
  });

  it('nothing counted for the receipt alone, routing to a buyer, deliveries, feedback or other streams', async function () {
    await spec
      .given(
        apiKeyIssued(),
        leadReceived(1),
        leadRoutedToBuyer(1, 'acme', 25),
        deliveryAttempted(1, 'acme', 1, '2026-11-20T15:05:00.000Z'),
        deliveryFailed(1, 'acme', 1, '2026-11-20T15:05:00.000Z', { next_attempt_at: '2026-11-20T15:06:00.000Z' }),
        leadDelivered(1, 'acme', 2, '2026-11-20T15:06:00.000Z'),
        feedbackRecorded(1, 'acme', 'conversion', '2026-11-20T15:07:00.000Z'),
      )
      .then({});
  });

  describe('replays and batches', function () {
    const history = (): NewLeadEvent[] => [
      ...soldLead(1, 'acme', 25),
      ...soldLead(2, 'acme', 30, { s1: 'click-2' }),
      ...unsoldLead(3, 'unsold-ca', { test: true }),
      ...rejectedLead(4, 'DUPLICATE'),
      ...returned(2, 'acme', 30, 'fraud', '2026-11-21T10:00:00.000Z'),
    ];
    const sold = { received: 2, accepted: 2, sold: 2, revenue_cents: 5500, returned: 1, returned_cents: 3000 };
    const rejected = { received: 1, rejected: 1, rejected_DUPLICATE: 1 };
    const expected = {
      report_buckets: { ...bucket({ buyer: 'acme' }, sold), ...bucket({ test: true }, UNSOLD), ...bucket({}, rejected) },
    };

    it('the same events twice change nothing', async function () {
      const events = recorded(...history());
      await spec.given(...events).then(expected);
      await spec.given(...events).when(...events).then(expected);
      // The last lead and the return again, after the checkpoint was lost.
      await spec.given(...events).when(...events.slice(-4)).then(expected);
    });

    it('events arriving in a later batch give the rows of one batch, each lead read back from its stream', async function () {
      const events = history();
      const later = (e: NewLeadEvent) => e.type !== 'LeadReceived';
      const early = await spec.given(...events.filter((e) => !later(e))).rows();
      expect(early).to.deep.equal({ report_buckets: {} });
      await spec.given(...events.filter((e) => !later(e))).when(...events.filter(later)).then(expected);
      await events.reduce((scenario, event) => scenario.when(event), spec.given()).then(expected);
    });
  });
});
