import { expect } from 'chai';
import type { RejectionCode } from '../../src/events/lead-events.js';
import { deliveriesProjection } from '../../src/projections/projections.js';
import {
  type NewLeadEvent,
  RECEIVED_AT,
  apiKeyIssued,
  deliveryAttempted,
  deliveryFailed,
  feedbackRecorded,
  leadDelivered,
  leadReceived,
  leadRoutedToBuyer,
  leadSold,
  noticeFailed,
  noticeRedeliveryRequested,
  personalDataErased,
  redeliveryRequested,
  rejectedLead,
  returned,
  soldLead,
  unsoldLead,
} from '../support/lead-events.js';
import { projectionSpec, recorded } from '../support/projection-spec.js';

// The deliveries (`deliveries`): one row per lead a buyer is to receive, whether the service
// sends it (webhook) or the buyer pulls it, and per lead left in a bucket. The delivery worker
// and the pull routes read it; each spec states the whole row.

const spec = projectionSpec(deliveriesProjection);

const AT = (minute: number) => `2026-11-20T15:${String(minute).padStart(2, '0')}:00.000Z`;

/** Lead 1's row as its sale makes it: pending, due at once; no copy of the lead (the read-back folds it from the stream). */
function row(changes: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    lead_id: 1,
    supplier: 'sup-a',
    buyer: 'acme',
    bucket: null,
    status: 'pending',
    attempts: 0,
    last_attempt_at: null,
    last_status_code: null,
    last_error: null,
    delivered_at: null,
    next_attempt_at: RECEIVED_AT,
    created_at: RECEIVED_AT,
    ...changes,
  };
}

describe('deliveries projection', function () {
  describe('rows made', function () {
    it('a sold lead: a pending row for its buyer, due at once, created when the sale was recorded', async function () {
      await spec.given(...soldLead(1, 'acme', 25)).then({ deliveries: { '1': row() } });
    });

    it('a lead sold after its post was received: created and due at the sale, not the receipt', async function () {
      // The sale is recorded by the store at its own time; the row is due from then.
      await spec.given(leadReceived(1), leadRoutedToBuyer(1, 'acme', 25, AT(9)), leadSold(1, 'acme', 25, AT(9))).then({
        deliveries: { '1': row({ next_attempt_at: AT(9), created_at: AT(9) }) },
      });
    });

    it('a lead routed to a bucket: a pending row in the bucket, for no buyer, never due for a webhook', async function () {
      await spec.given(...unsoldLead(1, 'unsold-ca')).then({ deliveries: { '1': row({ buyer: null, bucket: 'unsold-ca', next_attempt_at: null }) } });
    });

    it('buckets are kept apart, and each lead has its own row', async function () {
      await spec
        .given(...unsoldLead(1, 'unsold-ca'), ...unsoldLead(2, 'unsold-tx', { accident_state: 'TX', supplier: 'sup-b' }), ...soldLead(3, 'acme', 25))
        .then({
          deliveries: {
            '1': row({ buyer: null, bucket: 'unsold-ca', next_attempt_at: null }),
            '2': row({ lead_id: 2, supplier: 'sup-b', buyer: null, bucket: 'unsold-tx', next_attempt_at: null }),
            '3': row({ lead_id: 3 }),
          },
        });
    });
  });

  describe('no row', function () {
    it('a sold test lead: it is never delivered', async function () {
      await spec.given(...soldLead(1, 'acme', 25, { test: true })).then({});
    });

    it('an unsold test lead', async function () {
      await spec.given(...unsoldLead(1, 'unsold-ca', { test: true })).then({});
    });

    for (const code of ['INVALID', 'DUPLICATE', 'VERIFICATION_FAILED'] as RejectionCode[]) {
      it(`a lead rejected ${code}`, async function () {
        await spec.given(...rejectedLead(1, code)).then({});
      });
    }

    it('a sale whose stream has no LeadReceived', async function () {
      await spec.given(leadSold(1, 'acme', 25)).then({});
    });

    it('events of other streams', async function () {
      await spec.given(apiKeyIssued()).then({});
    });
  });

  describe('attempts', function () {
    it('an attempt taken: counted, with its start', async function () {
      await spec.given(...soldLead(1, 'acme', 25), deliveryAttempted(1, 'acme', 1, AT(5))).then({
        deliveries: { '1': row({ attempts: 1, last_attempt_at: AT(5) }) },
      });
    });

    it('delivered by webhook: delivered, how (via), with the status, at the attempt made', async function () {
      await spec.given(...soldLead(1, 'acme', 25), deliveryAttempted(1, 'acme', 1, AT(5)), leadDelivered(1, 'acme', 1, AT(5))).then({
        deliveries: { '1': row({ status: 'delivered', via: 'webhook', attempts: 1, last_attempt_at: AT(5), last_status_code: 200, delivered_at: AT(5), next_attempt_at: null }) },
      });
    });

    it('pulled and acknowledged: delivered, how (via), with no status code', async function () {
      await spec.given(...soldLead(1, 'acme', 25), leadDelivered(1, 'acme', 1, AT(7), { via: 'pull' })).then({
        deliveries: { '1': row({ status: 'delivered', via: 'pull', attempts: 1, last_attempt_at: AT(7), delivered_at: AT(7), next_attempt_at: null }) },
      });
    });

    it('a failure with a retry due: still pending, due at the retry, with the failure', async function () {
      await spec.given(...soldLead(1, 'acme', 25), deliveryAttempted(1, 'acme', 1, AT(5)), deliveryFailed(1, 'acme', 1, AT(5), { next_attempt_at: AT(6) })).then({
        deliveries: { '1': row({ attempts: 1, last_attempt_at: AT(5), last_status_code: 503, last_error: 'http_5xx', next_attempt_at: AT(6) }) },
      });
    });

    it('a timeout with a retry due: no status code, the error kept', async function () {
      await spec.given(...soldLead(1, 'acme', 25), deliveryFailed(1, 'acme', 1, AT(5), { next_attempt_at: AT(6), status: null })).then({
        deliveries: { '1': row({ attempts: 1, last_attempt_at: AT(5), last_error: 'timeout', next_attempt_at: AT(6) }) },
      });
    });

    it('a final failure: failed, never due again', async function () {
      await spec
        .given(
          ...soldLead(1, 'acme', 25),
          deliveryFailed(1, 'acme', 1, AT(5), { next_attempt_at: AT(6) }),
          deliveryAttempted(1, 'acme', 2, AT(6)),
          deliveryFailed(1, 'acme', 2, AT(6), { next_attempt_at: null, status: 410 }),
        )
        .then({ deliveries: { '1': row({ status: 'failed', attempts: 2, last_attempt_at: AT(6), last_status_code: 410, last_error: 'http_4xx', next_attempt_at: null }) } });
    });

    it('a final failure sent again: pending and due at the request, the last failure still shown until the next attempt', async function () {
      await spec
        .given(
          ...soldLead(1, 'acme', 25),
          deliveryAttempted(1, 'acme', 1, AT(5)),
          deliveryFailed(1, 'acme', 1, AT(5), { next_attempt_at: null, status: 401 }),
          redeliveryRequested(1, 'acme', 2, 1, AT(9)),
        )
        .then({ deliveries: { '1': row({ attempts: 1, last_attempt_at: AT(5), last_status_code: 401, last_error: 'http_4xx', next_attempt_at: AT(9) }) } });
    });

    it("an erased lead's notice given up, then sent again: the notice failed, then pending and due at the request, the delivery as it was", async function () {
      const delivered = [...soldLead(1, 'acme', 25), deliveryAttempted(1, 'acme', 1, AT(5)), leadDelivered(1, 'acme', 1, AT(5))];
      const givenUp = [...delivered, personalDataErased(1, 'acme', AT(6)), noticeFailed(1, 'acme', 1, AT(6), AT(7)), noticeFailed(1, 'acme', 2, AT(7), null)];
      const deliveredRow = (await spec.given(...delivered).rows()).deliveries!['1']!;
      await spec.given(...givenUp).then({ deliveries: { '1': { ...deliveredRow, erased: true, notice: 'failed', notice_next_at: null } } });
      await spec
        .given(...givenUp, noticeRedeliveryRequested(1, 'acme', 2, 2, AT(9)))
        .then({ deliveries: { '1': { ...deliveredRow, erased: true, notice: 'pending', notice_next_at: AT(9) } } });
    });

    it('delivered on a retry: the last failure cleared', async function () {
      await spec
        .given(
          ...soldLead(1, 'acme', 25),
          deliveryFailed(1, 'acme', 1, AT(5), { next_attempt_at: AT(6) }),
          deliveryAttempted(1, 'acme', 2, AT(6)),
          leadDelivered(1, 'acme', 2, AT(6)),
        )
        .then({ deliveries: { '1': row({ status: 'delivered', via: 'webhook', attempts: 2, last_attempt_at: AT(6), last_status_code: 200, delivered_at: AT(6), next_attempt_at: null }) } });
    });

    it('feedback and returns do not touch the row', async function () {
      const delivered = row({ status: 'delivered', via: 'webhook', attempts: 1, last_attempt_at: AT(5), last_status_code: 200, delivered_at: AT(5), next_attempt_at: null });
      await spec
        .given(...soldLead(1, 'acme', 25), leadDelivered(1, 'acme', 1, AT(5)), feedbackRecorded(1, 'acme', 'contacted', AT(8)), ...returned(1, 'acme', 25, 'fraud', AT(9)))
        .then({ deliveries: { '1': delivered } });
    });
  });

  describe('replays and batches', function () {
    const history = (): NewLeadEvent[] => [
      ...soldLead(1, 'acme', 25),
      ...soldLead(2, 'acme', 30, { test: true }),
      ...unsoldLead(3, 'unsold-ca'),
      ...rejectedLead(4, 'DUPLICATE'),
      deliveryAttempted(1, 'acme', 1, AT(5)),
      deliveryFailed(1, 'acme', 1, AT(5), { next_attempt_at: AT(6) }),
      deliveryAttempted(1, 'acme', 2, AT(6)),
      leadDelivered(1, 'acme', 2, AT(6)),
      // Failed for good, sent again, pending.
      ...soldLead(5, 'acme', 25),
      deliveryAttempted(5, 'acme', 1, AT(5)),
      deliveryFailed(5, 'acme', 1, AT(5), { next_attempt_at: null, status: 401 }),
      redeliveryRequested(5, 'acme', 2, 1, AT(9)),
    ];
    const expected = {
      deliveries: {
        '1': row({ status: 'delivered', via: 'webhook', attempts: 2, last_attempt_at: AT(6), last_status_code: 200, delivered_at: AT(6), next_attempt_at: null }),
        '3': row({ lead_id: 3, buyer: null, bucket: 'unsold-ca', next_attempt_at: null }),
        '5': row({ lead_id: 5, attempts: 1, last_attempt_at: AT(5), last_status_code: 401, last_error: 'http_4xx', next_attempt_at: AT(9) }),
      },
    };

    it('the same events twice change nothing', async function () {
      const events = recorded(...history());
      await spec.given(...events).then(expected);
      await spec.given(...events).when(...events).then(expected);
      // The sale again after the delivery does not make the row pending again.
      await spec.given(...events).when(...events.slice(2, 4)).then(expected);
    });

    it('events arriving in a later batch give the rows of one batch, each lead read back from its stream', async function () {
      const events = history();
      const later = (e: NewLeadEvent) => e.type !== 'LeadReceived';
      await spec.given(...events.filter((e) => !later(e))).when(...events.filter(later)).then(expected);
      await events.reduce((scenario, event) => scenario.when(event), spec.given()).then(expected);
      // Nothing is written before the sale: a lead received in one batch has no row yet.
      const received = await spec.given(...events.filter((e) => !later(e))).rows();
      expect(received.deliveries).to.deep.equal({});
    });
  });
});
