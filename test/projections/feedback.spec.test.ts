import { feedbackProjection } from '../../src/projections/projections.js';
import {
  type NewLeadEvent,
  apiKeyIssued,
  deliveryFailed,
  feedbackRecorded,
  leadDelivered,
  leadReturned,
  rejectedLead,
  returned,
  soldLead,
  unsoldLead,
} from '../support/lead-events.js';
import { eventIdAt, projectionSpec, recorded } from '../support/projection-spec.js';

// The buyers' feedback (`feedback`): one row per FeedbackRecorded, keyed by the event's id, with
// the supplier of the lead so that a supplier can list the feedback on its own leads.

const spec = projectionSpec(feedbackProjection);

const AT = (minute: number) => `2026-11-20T15:${String(minute).padStart(2, '0')}:00.000Z`;

/** Lead 1's sale is the first four events: its first feedback is the fifth. */
const FIRST = eventIdAt(5);

describe('feedback projection', function () {
  for (const type of ['conversion', 'contacted'] as const) {
    it(`${type}: a row with the buyer, type, reason and time, and the lead's supplier`, async function () {
      await spec.given(...soldLead(1, 'acme', 25, { supplier: 'sup-b' }), feedbackRecorded(1, 'acme', type, AT(10))).then({
        feedback: { [FIRST]: { lead_id: 1, buyer: 'acme', type, reason: null, recorded_at: AT(10), supplier: 'sup-b' } },
      });
    });
  }

  it('a return: one row for the feedback with its reason; the reversal itself adds none', async function () {
    await spec.given(...soldLead(1, 'acme', 25), ...returned(1, 'acme', 25, 'bad_phone', AT(30))).then({
      feedback: { [FIRST]: { lead_id: 1, buyer: 'acme', type: 'return', reason: 'bad_phone', recorded_at: AT(30), supplier: 'sup-a' } },
    });
  });

  it('every feedback is a row of its own, several on one lead too', async function () {
    await spec
      .given(
        ...soldLead(1, 'acme', 25),
        feedbackRecorded(1, 'acme', 'contacted', AT(10)),
        feedbackRecorded(1, 'acme', 'conversion', AT(20), 'policy_bound'),
        ...soldLead(2, 'zenith', 40, { supplier: 'sup-b' }),
        feedbackRecorded(2, 'zenith', 'contacted', AT(21)),
      )
      .then({
        feedback: {
          [eventIdAt(5)]: { lead_id: 1, buyer: 'acme', type: 'contacted', reason: null, recorded_at: AT(10), supplier: 'sup-a' },
          [eventIdAt(6)]: { lead_id: 1, buyer: 'acme', type: 'conversion', reason: 'policy_bound', recorded_at: AT(20), supplier: 'sup-a' },
          [eventIdAt(11)]: { lead_id: 2, buyer: 'zenith', type: 'contacted', reason: null, recorded_at: AT(21), supplier: 'sup-b' },
        },
      });
  });

  it('the row is keyed by the id the store gave the event', async function () {
    const id = '0193a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b';
    await spec.given(...soldLead(1, 'acme', 25), { ...feedbackRecorded(1, 'acme', 'contacted', AT(10)), id }).then({
      feedback: { [id]: { lead_id: 1, buyer: 'acme', type: 'contacted', reason: null, recorded_at: AT(10), supplier: 'sup-a' } },
    });
  });

  it('feedback on a lead whose stream has no LeadReceived: kept, with no supplier', async function () {
    await spec.given(feedbackRecorded(1, 'acme', 'contacted', AT(10))).then({
      feedback: { [eventIdAt(1)]: { lead_id: 1, buyer: 'acme', type: 'contacted', reason: null, recorded_at: AT(10), supplier: null } },
    });
  });

  it('no row from any other event: the post, deliveries, a reversal alone, other streams', async function () {
    await spec
      .given(
        apiKeyIssued(),
        ...soldLead(1, 'acme', 25),
        ...rejectedLead(2, 'INVALID'),
        ...unsoldLead(3, 'unsold-ca'),
        deliveryFailed(1, 'acme', 1, AT(5), { next_attempt_at: AT(6) }),
        leadDelivered(1, 'acme', 2, AT(6)),
        leadReturned(1, 'acme', 25, 'fraud', AT(9)),
      )
      .then({});
  });

  describe('replays and batches', function () {
    const history = (): NewLeadEvent[] => [
      ...soldLead(1, 'acme', 25),
      ...soldLead(2, 'acme', 30, { supplier: 'sup-b' }),
      feedbackRecorded(1, 'acme', 'contacted', AT(10)),
      ...returned(2, 'acme', 30, 'fraud', AT(11)),
      feedbackRecorded(1, 'acme', 'conversion', AT(12)),
    ];
    const expected = {
      feedback: {
        [eventIdAt(9)]: { lead_id: 1, buyer: 'acme', type: 'contacted', reason: null, recorded_at: AT(10), supplier: 'sup-a' },
        [eventIdAt(10)]: { lead_id: 2, buyer: 'acme', type: 'return', reason: 'fraud', recorded_at: AT(11), supplier: 'sup-b' },
        [eventIdAt(12)]: { lead_id: 1, buyer: 'acme', type: 'conversion', reason: null, recorded_at: AT(12), supplier: 'sup-a' },
      },
    };

    it('the same events twice change nothing', async function () {
      const events = recorded(...history());
      await spec.given(...events).then(expected);
      await spec.given(...events).when(...events).then(expected);
      await spec.given(...events).when(...events.slice(9)).then(expected);
    });

    it('events arriving in a later batch give the rows of one batch, the supplier read back from the stream', async function () {
      const events = history();
      await spec.given(...events.slice(0, 8)).when(...events.slice(8)).then(expected);
      await events.reduce((scenario, event) => scenario.when(event), spec.given()).then(expected);
    });
  });
});
