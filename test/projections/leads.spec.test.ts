import { expect } from 'chai';
import type { RejectionCode } from '../../src/events/lead-events.js';
import type { LeadView } from '../../src/projections/lead-view.js';
import { leadViewFromEvents } from '../../src/projections/lead-view.js';
import { leadsProjection } from '../../src/projections/projections.js';
import {
  FAILING_PHONE,
  type NewLeadEvent,
  PASSING_CHECKS,
  RECEIVED_AT,
  REJECTION_ERRORS,
  apiKeyIssued,
  consumer,
  contactsOf,
  deliveryAttempted,
  deliveryFailed,
  redeliveryRequested,
  feedbackRecorded,
  leadDelivered,
  leadEnriched,
  leadReceived,
  leadRoutedToBuyer,
  type OtherStreamEvent,
  leadSold,
  rejectedLead,
  returned,
  soldLead,
  unsoldLead,
} from '../support/lead-events.js';
import { projectionSpec, recorded } from '../support/projection-spec.js';

// The lead view (`leads`): one document per lead, what GET /functions/leads/{id} shows. Each spec
// gives a lead's events and states the whole document they make.

const spec = projectionSpec(leadsProjection);

const AT = (minute: number) => `2026-11-20T15:${String(minute).padStart(2, '0')}:00.000Z`;

/** The view of lead 1 as its LeadReceived makes it, with the fields later events changed. */
function view(changes: Partial<Record<keyof LeadView, unknown>> = {}): Record<string, unknown> {
  return {
    lead_id: 1,
    supplier: 'sup-a',
    sid: 'sid-1',
    s1: 'click-1',
    accident_state: 'CA',
    test: false,
    received_at: RECEIVED_AT,
    lead: consumer(),
    lead_status: 'received',
    code: null,
    sold: false,
    revenue: 0,
    currency: 'USD',
    buyer: null,
    bucket: null,
    errors: [],
    enrichment: null,
    delivery: null,
    feedback: [],
    returned: false,
    ...changes,
  };
}

/**
 * The report counters a lead's outcome adds to its view, as `report_<counter>`: what a report by s1
 * sums. The lead's hour, supplier, sid, state, buyer and test flag are the view's own fields.
 */
const counted = (counters: Record<string, number>) => Object.fromEntries(Object.entries(counters).map(([c, n]) => [`report_${c}`, n]));
/** A lead's events as `leadpost seal-clear-leads` leaves a lead an older release wrote in clear: its LeadReceived marked with the version it was written in. */
const sealedLater = ([received, ...rest]: NewLeadEvent[]): NewLeadEvent[] => [{ ...received!, metadata: { ...received!.metadata, sealed_from_schema: 1 } }, ...rest];
/** The contact hashes a lead's view carries when the lead holds no claim on them (a test or rejected lead). */
const unclaimed = (leadId = 1) => ({ contact_mobile: contactsOf(leadId).mobile, contact_email: contactsOf(leadId).email });
const UNSOLD_COUNTS = counted({ received: 1, accepted: 1, unsold: 1 });
const rejectedCounts = (code: RejectionCode) => counted({ received: 1, rejected: 1, [`rejected_${code}`]: 1 });

const SOLD = {
  lead_status: 'sold',
  code: 'SOLD',
  sold: true,
  revenue: 25,
  buyer: 'acme',
  enrichment: PASSING_CHECKS,
  delivery: { status: 'pending', attempts: 0 },
  ...counted({ received: 1, accepted: 1, sold: 1, revenue_cents: 2500 }),
} as const;

describe('leads projection (the lead view)', function () {
  it('a lead received: its source, click id, state, time and consumer, nothing decided yet', async function () {
    await spec.given(leadReceived(1)).then({ leads: { '1': view() } });
  });

  it('an accepted, sold lead: sold to the buyer at the revenue, with the checks, delivery pending, counted as received, accepted and sold with its revenue in cents', async function () {
    await spec.given(...soldLead(1, 'acme', 25)).then({ leads: { '1': view(SOLD) } });
  });

  it('an accepted lead routed to a bucket: unsold, in the bucket, delivery pending for a pull, counted as received, accepted and unsold', async function () {
    await spec.given(...unsoldLead(1, 'unsold-ca')).then({
      leads: {
        '1': view({ lead_status: 'unsold', code: 'UNSOLD', bucket: 'unsold-ca', enrichment: PASSING_CHECKS, delivery: { status: 'pending', attempts: 0 }, ...UNSOLD_COUNTS }),
      },
    });
  });

  describe('rejected leads', function () {
    it('INVALID: the fields that passed, no consumer, the field errors', async function () {
      await spec.given(...rejectedLead(1, 'INVALID')).then({
        leads: { '1': view({ s1: null, accident_state: null, lead: null, lead_status: 'rejected', code: 'INVALID', errors: REJECTION_ERRORS.INVALID, ...rejectedCounts('INVALID') }) },
      });
    });

    it('DUPLICATE: the matching field named, never enriched', async function () {
      await spec.given(...rejectedLead(1, 'DUPLICATE')).then({
        leads: { '1': view({ lead_status: 'rejected', code: 'DUPLICATE', errors: REJECTION_ERRORS.DUPLICATE, ...rejectedCounts('DUPLICATE'), ...unclaimed() }) },
      });
    });

    it('VERIFICATION_FAILED: the failed check kept in the enrichment', async function () {
      await spec.given(...rejectedLead(1, 'VERIFICATION_FAILED')).then({
        leads: { '1': view({ lead_status: 'rejected', code: 'VERIFICATION_FAILED', errors: REJECTION_ERRORS.VERIFICATION_FAILED, enrichment: FAILING_PHONE, ...rejectedCounts('VERIFICATION_FAILED'), ...unclaimed() }) },
      });
    });
  });

  describe('contact hashes, by which an erasure finds a lead', function () {
    it('an accepted lead carries none: it claimed both contacts, and the claims in their streams name it', async function () {
      const [sold] = recorded(...soldLead(1, 'acme', 25));
      expect((sold!.data as { contacts?: unknown }).contacts, 'the lead recorded its hashes').to.deep.equal(contactsOf(1));
      await spec.given(...soldLead(1, 'acme', 25), ...unsoldLead(2, 'unsold-ca')).then({
        leads: {
          '1': view(SOLD),
          '2': view({ lead_id: 2, lead_status: 'unsold', code: 'UNSOLD', bucket: 'unsold-ca', enrichment: PASSING_CHECKS, delivery: { status: 'pending', attempts: 0 }, ...UNSOLD_COUNTS }),
        },
      });
    });

    it('a lead rejected SUPPRESSED keeps no consumer, but carries both hashes', async function () {
      await spec.given(...rejectedLead(1, 'SUPPRESSED')).then({
        leads: { '1': view({ lead: null, lead_status: 'rejected', code: 'SUPPRESSED', errors: REJECTION_ERRORS.SUPPRESSED, ...rejectedCounts('SUPPRESSED'), ...unclaimed() }) },
      });
    });

    it('a sold lead an older release wrote in clear, sealed later, carries both: it claimed none under their keyed names', async function () {
      await spec.given(...sealedLater(soldLead(1, 'acme', 25))).then({ leads: { '1': view({ ...SOLD, ...unclaimed() }) } });
    });

    it('a rejected lead carries both, also when its rejection comes in a later batch (its LeadReceived read back from its stream)', async function () {
      const [received, rejected] = rejectedLead(1, 'DUPLICATE');
      await spec.given(received!).when(rejected!).then({
        leads: { '1': view({ lead_status: 'rejected', code: 'DUPLICATE', errors: REJECTION_ERRORS.DUPLICATE, ...rejectedCounts('DUPLICATE'), ...unclaimed() }) },
      });
    });
  });

  describe('test leads', function () {
    const testView = (changes: Partial<Record<keyof LeadView, unknown>>) => view({ test: true, lead: consumer({ test: true }), ...unclaimed(), ...changes });

    it('a sold test lead is flagged and shows no delivery: it is never delivered', async function () {
      await spec.given(...soldLead(1, 'acme', 25, { test: true })).then({ leads: { '1': testView({ ...SOLD, delivery: null }) } });
    });

    it('an unsold test lead shows no delivery either', async function () {
      await spec.given(...unsoldLead(1, 'unsold-ca', { test: true })).then({
        leads: { '1': testView({ lead_status: 'unsold', code: 'UNSOLD', bucket: 'unsold-ca', enrichment: PASSING_CHECKS, delivery: null, ...UNSOLD_COUNTS }) },
      });
    });
  });

  it('the enrichment: every check with its result, provider and detail, whatever the result', async function () {
    const checks = {
      phone: { result: 'pass', provider: 'libphonenumber', detail: 'mobile' },
      email: { result: 'unknown', provider: 'dns-mx', detail: 'timeout' },
      consent: { result: 'fail', provider: 'trustedform', detail: 'expired' },
    } as const;
    await spec.given(leadReceived(1), leadEnriched(1, checks)).then({ leads: { '1': view({ enrichment: checks }) } });
  });

  describe('delivery', function () {
    it('an attempt taken does not change the view: it shows outcomes', async function () {
      await spec.given(...soldLead(1, 'acme', 25), deliveryAttempted(1, 'acme', 1, AT(5))).then({ leads: { '1': view(SOLD) } });
    });

    it('a failed attempt with a retry due: pending, with the attempts made', async function () {
      await spec
        .given(...soldLead(1, 'acme', 25), deliveryAttempted(1, 'acme', 1, AT(5)), deliveryFailed(1, 'acme', 1, AT(5), { next_attempt_at: AT(6) }))
        .then({ leads: { '1': view({ ...SOLD, delivery: { status: 'pending', attempts: 1 } }) } });
    });

    it('a final failure: failed, with every attempt counted', async function () {
      await spec
        .given(
          ...soldLead(1, 'acme', 25),
          deliveryFailed(1, 'acme', 1, AT(5), { next_attempt_at: AT(6) }),
          deliveryFailed(1, 'acme', 2, AT(6), { next_attempt_at: AT(8), status: null }),
          deliveryFailed(1, 'acme', 3, AT(8), { next_attempt_at: null, status: 400 }),
        )
        .then({ leads: { '1': view({ ...SOLD, delivery: { status: 'failed', attempts: 3 } }) } });
    });

    it('a final failure sent again: pending, with the attempts made so far; then delivered in the new round', async function () {
      const failed = [...soldLead(1, 'acme', 25), deliveryAttempted(1, 'acme', 1, AT(5)), deliveryFailed(1, 'acme', 1, AT(5), { next_attempt_at: null, status: 401 })];
      await spec.given(...failed, redeliveryRequested(1, 'acme', 2, 1, AT(9))).then({ leads: { '1': view({ ...SOLD, delivery: { status: 'pending', attempts: 1 } }) } });
      await spec
        .given(...failed, redeliveryRequested(1, 'acme', 2, 1, AT(9)), deliveryAttempted(1, 'acme', 2, AT(9)), leadDelivered(1, 'acme', 2, AT(9)))
        .then({ leads: { '1': view({ ...SOLD, delivery: { status: 'delivered', attempts: 2 } }) } });
    });

    it('delivered on a retry: delivered, at the attempt that succeeded', async function () {
      await spec
        .given(...soldLead(1, 'acme', 25), deliveryFailed(1, 'acme', 1, AT(5), { next_attempt_at: AT(6) }), deliveryAttempted(1, 'acme', 2, AT(6)), leadDelivered(1, 'acme', 2, AT(6)))
        .then({ leads: { '1': view({ ...SOLD, delivery: { status: 'delivered', attempts: 2 } }) } });
    });

    it('pulled and acknowledged by the buyer: delivered', async function () {
      await spec
        .given(...soldLead(1, 'acme', 25), leadDelivered(1, 'acme', 1, AT(7), { via: 'pull' }))
        .then({ leads: { '1': view({ ...SOLD, delivery: { status: 'delivered', attempts: 1 } }) } });
    });
  });

  describe('after the sale', function () {
    it('feedback: each entry appended in the order recorded, reason kept', async function () {
      await spec
        .given(...soldLead(1, 'acme', 25), feedbackRecorded(1, 'acme', 'contacted', AT(10)), feedbackRecorded(1, 'acme', 'conversion', AT(20), 'policy_bound'))
        .then({
          leads: {
            '1': view({
              ...SOLD,
              feedback: [
                { buyer: 'acme', type: 'contacted', reason: null, recorded_at: AT(10) },
                { buyer: 'acme', type: 'conversion', reason: 'policy_bound', recorded_at: AT(20) },
              ],
            }),
          },
        });
    });

    it('a return: the feedback with its reason, and the lead marked returned and counted as returned with the revenue reversed; the sale stays as it was', async function () {
      await spec.given(...soldLead(1, 'acme', 25), ...returned(1, 'acme', 25, 'bad_phone', AT(30))).then({
        leads: {
          '1': view({
            ...SOLD,
            feedback: [{ buyer: 'acme', type: 'return', reason: 'bad_phone', recorded_at: AT(30) }],
            returned: true,
            ...counted({ returned: 1, returned_cents: 2500 }),
          }),
        },
      });
    });
  });

  it('leads are kept apart, and events of other streams write nothing', async function () {
    await spec.given(apiKeyIssued(), ...soldLead(1, 'acme', 25), ...rejectedLead(2, 'DUPLICATE', { supplier: 'sup-b' }), apiKeyIssued()).then({
      leads: {
        '1': view(SOLD),
        '2': view({ lead_id: 2, supplier: 'sup-b', lead_status: 'rejected', code: 'DUPLICATE', errors: REJECTION_ERRORS.DUPLICATE, ...rejectedCounts('DUPLICATE'), ...unclaimed(2) }),
      },
    });
  });

  describe('erasures: one document each, for the admins\' list', function () {
    const erased = (leadIds: number[], at: string, options: { suppressed?: boolean; contacts?: Record<string, string> } = {}): OtherStreamEvent => ({
      // Its own id, as the event store gives it: a replay sends the same event again.
      id: `01937a4e-0000-7000-8000-${at.slice(14, 16).padStart(12, '0')}`,
      streamId: 'erasure-0123456789abcdef0123456789abcdef',
      type: 'ConsumerErased',
      data: {
        erasure_id: '0123456789abcdef0123456789abcdef',
        contacts: options.contacts ?? { email: 'e'.repeat(64) },
        lead_ids: leadIds,
        suppressed: options.suppressed ?? false,
        principal: 'admin:root',
        erased_at: at,
        looked_up_to: { commit: 9, prepare: 9 },
      },
      metadata: { schema: 1, occurred_at: at },
    });

    const row = (erasedAt: string, changes: Record<string, unknown> = {}) => ({
      erasure_id: '0123456789abcdef0123456789abcdef',
      erased_at: erasedAt,
      principal: 'admin:root',
      fields: ['email'],
      suppressed: false,
      ...changes,
    });

    it('a row per request: when, by whom, which contacts named the consumer (never their hashes), how many leads it erased', async function () {
      const first = erased([1, 2], AT(20), { contacts: { email: 'e'.repeat(64), mobile: 'm'.repeat(64) } });
      await spec.given(first).then({ leads: {}, erasures: { [first.id!]: row(AT(20), { fields: ['email', 'mobile'], leads_erased: 2 }) } });
    });

    it('a later request of the same erasure is a row of its own, and replayed, nothing is doubled', async function () {
      const events = [erased([1], AT(20), { suppressed: true }), erased([3, 4], AT(40))];
      const expected = {
        leads: {},
        erasures: { [events[0]!.id!]: row(AT(20), { suppressed: true, leads_erased: 1 }), [events[1]!.id!]: row(AT(40), { leads_erased: 2 }) },
      };
      await spec.given(...events).then(expected);
      await spec.given(...events).when(...events).then(expected);
    });
  });

  describe('replays and batches', function () {
    const history = (): NewLeadEvent[] => [
      ...soldLead(1, 'acme', 25),
      ...soldLead(2, 'acme', 30, { test: true }),
      ...unsoldLead(3, 'unsold-ca'),
      deliveryFailed(1, 'acme', 1, AT(5), { next_attempt_at: AT(6) }),
      leadDelivered(1, 'acme', 2, AT(6)),
      feedbackRecorded(1, 'acme', 'contacted', AT(10)),
      ...returned(1, 'acme', 25, 'bad_phone', AT(30)),
    ];

    it('the same events twice change nothing', async function () {
      const events = recorded(...history());
      const once = await spec.given(...events).rows();
      expect(Object.keys(once.leads!)).to.deep.equal(['1', '2', '3']);
      await spec.given(...events).when(...events).then(once);
      // Also when only the events after some point come again (a commit lost after its writes).
      await spec.given(...events).when(...events.slice(6)).then(once);
    });

    it('events arriving in a later batch give the rows of one batch, also for a test lead read back from its stream', async function () {
      const events = history();
      const later = (e: NewLeadEvent) => e.type !== 'LeadReceived' && e.type !== 'LeadEnriched';
      const oneBatch = await spec.given(...events).rows();
      expect(oneBatch.leads!['2']).to.include({ test: true, delivery: null });
      await spec.given(...events.filter((e) => !later(e))).when(...events.filter(later)).then(oneBatch);
      // Event by event, each in a batch of its own.
      await events.reduce((scenario, event) => scenario.when(event), spec.given()).then(oneBatch);
    });
  });

  describe('the view folded from a lead stream', function () {
    // A lead the projection has not reached yet is read by folding its stream; both must agree.
    const cases: Record<string, NewLeadEvent[]> = {
      sold: [...soldLead(1, 'acme', 25), deliveryFailed(1, 'acme', 1, AT(5), { next_attempt_at: AT(6) }), leadDelivered(1, 'acme', 2, AT(6)), ...returned(1, 'acme', 25, 'fraud', AT(9))],
      unsold: unsoldLead(1, 'unsold-ca'),
      'sold test lead': soldLead(1, 'acme', 25, { test: true }),
      'unsold test lead': unsoldLead(1, 'unsold-ca', { test: true }),
      ...Object.fromEntries((['INVALID', 'DUPLICATE', 'VERIFICATION_FAILED', 'SUPPRESSED', 'PING_EXPIRED'] as RejectionCode[]).map((code) => [code, rejectedLead(1, code)])),
      'rejected test lead': rejectedLead(1, 'DUPLICATE', { test: true }),
      'sold lead sealed after the fact': sealedLater(soldLead(1, 'acme', 25)),
    };
    for (const [name, events] of Object.entries(cases)) {
      it(`equals the projected view: ${name}`, async function () {
        await spec.given(...events).then({ leads: { '1': { ...leadViewFromEvents(recorded(...events)) } } });
      });
    }
  });
});
