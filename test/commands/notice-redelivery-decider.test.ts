import { expect } from 'chai';
import { RedeliveryRefusedError } from '../../src/delivery/attempt.js';
import { noticeDecider } from '../../src/delivery/erasure-notice.js';
import { redeliveryDecider } from '../../src/delivery/redeliver.js';
import type { LeadEvent } from '../../src/events/lead-events.js';
import { deciderSpec } from '../support/decider-spec.js';

// A `lead.erased` notice that failed for good, sent again when an admin asks, as given(events) /
// when(command) / then(events): the notice's own decider, and the redelivery's, which decides a
// lead whose personal data is gone by its notice and any other by its delivery.

const T0 = new Date('2026-11-21T15:00:00.000Z');
const at = (ms: number) => new Date(T0.getTime() + ms).toISOString();
const BUYER = 'hook-buyer';

const received: LeadEvent = {
  type: 'LeadReceived',
  data: { lead_id: 7, supplier: 'sup-1', key_id: 'k1', sid: 'src-1', s1: null, accident_state: 'CA', test: false, lead: null, received_at: at(0) },
};
const sold: LeadEvent = { type: 'LeadSold', data: { lead_id: 7, buyer: BUYER, revenue: 31.25, currency: 'USD', sold_at: at(0) } };
const attempted: LeadEvent = { type: 'LeadDeliveryAttempted', data: { lead_id: 7, buyer: BUYER, attempt: 1, started_at: at(1), timeout_ms: 1000 } };
const delivered: LeadEvent = { type: 'LeadDelivered', data: { lead_id: 7, buyer: BUYER, via: 'webhook', attempt: 1, status: 200, latency_ms: 5, delivered_at: at(2) } };
const erased = (notify: string | null = BUYER): LeadEvent => ({
  type: 'LeadPersonalDataErased',
  data: { lead_id: 7, erasure_id: 'e'.repeat(32), had_delivery: true, notify_buyer: notify, erased_at: at(10) },
});
const noticeFailed = (attempt: number, next: string | null): LeadEvent => ({
  type: 'ErasureNoticeFailed',
  data: { lead_id: 7, buyer: BUYER, attempt, status: 503, error: 'http_5xx', next_attempt_at: next, failed_at: at(10 + attempt) },
});
const noticeSent = (attempt: number): Extract<LeadEvent, { type: 'ErasureNoticeSent' }> => ({ type: 'ErasureNoticeSent', data: { lead_id: 7, buyer: BUYER, attempt, status: 200, sent_at: at(10 + attempt) } });
const requested = (round: number, attempts: number, ms: number, reason: string | null = 'buyer_outage'): LeadEvent => ({
  type: 'ErasureNoticeRedeliveryRequested',
  data: { lead_id: 7, buyer: BUYER, round, attempts, requested_by: { role: 'admin', name: 'ops' }, reason, requested_at: at(ms) },
});
const request = (ms: number, reason: string | null = 'buyer_outage', buyers = [BUYER]) => ({
  requestedBy: { role: 'admin', name: 'ops' },
  reason,
  now: new Date(at(ms)),
  buyerKnown: (buyer: string) => buyers.includes(buyer),
});
const refused = (code: string, subject: 'delivery' | 'notice') => (error: unknown) => {
  expect(error).to.be.instanceOf(RedeliveryRefusedError);
  expect(error).to.include({ code, subject });
};

/** Delivered, erased, and its notice given up after two attempts (max_attempts 2). */
const noticeFailedForGood = [received, sold, attempted, delivered, erased(), noticeFailed(1, at(12)), noticeFailed(2, null)];

describe('erasure notice decider: sending a notice that failed for good again', () => {
  const { given } = deciderSpec(noticeDecider);
  const reopen = (ms: number, reason: string | null = 'buyer_outage', buyers = [BUYER]) => ({ type: 'RequestNoticeRedelivery' as const, request: request(ms, reason, buyers) });
  const record = (attempt: number, outcome: Extract<LeadEvent, { type: 'ErasureNoticeSent' }>) => ({ type: 'RecordNoticeOutcome' as const, attempt, outcome });

  it('a notice failed for good is re-opened: round 2, after the attempts made, due at the request', () =>
    given(...noticeFailedForGood).when(reopen(60_000)).then([requested(2, 2, 60_000)]));
  it('no reason given: none recorded', () => given(...noticeFailedForGood).when(reopen(60_000, null)).then([requested(2, 2, 60_000, null)]));
  it('given up, no outcome is recorded; re-opened, the next attempt is, numbered after the last', async () => {
    await given(...noticeFailedForGood).when(record(3, noticeSent(3))).thenNothing();
    await given(...noticeFailedForGood, requested(2, 2, 60_000)).when(record(3, noticeSent(3))).then([noticeSent(3)]);
    // An attempt of the round before, recorded late by another instance, is not recorded twice.
    await given(...noticeFailedForGood, requested(2, 2, 60_000)).when(record(2, noticeSent(2))).thenNothing();
  });
  it('a second round failed for good is re-opened as round 3', () =>
    given(...noticeFailedForGood, requested(2, 2, 60_000), noticeFailed(3, at(61_000)), noticeFailed(4, null)).when(reopen(70_000)).then([requested(3, 4, 70_000)]));
  it('sent, pending, still to be tried, or re-opened already (two requests at once): NOT_FAILED', async () => {
    await given(received, sold, attempted, delivered, erased(), noticeSent(1)).when(reopen(1)).thenThrows(refused('NOT_FAILED', 'notice'));
    await given(received, sold, attempted, delivered, erased(), noticeFailed(1, at(12))).when(reopen(1)).thenThrows(refused('NOT_FAILED', 'notice'));
    await given(received, sold, attempted, delivered, erased()).when(reopen(1)).thenThrows(refused('NOT_FAILED', 'notice'));
    await given(...noticeFailedForGood, requested(2, 2, 60_000)).when(reopen(60_001)).thenThrows(refused('NOT_FAILED', 'notice'));
  });
  it('a lead with no notice (its buyer took it by pull, or was never sent it): NOT_FOUND', async () => {
    await given(received, sold, erased(null)).when(reopen(1)).thenThrows(refused('NOT_FOUND', 'notice'));
    await given(received, sold).when(reopen(1)).thenThrows(refused('NOT_FOUND', 'notice'));
  });
  it('a buyer the routing file no longer has: BUYER_UNKNOWN, since no worker would send it', () =>
    given(...noticeFailedForGood).when(reopen(60_000, null, ['another-buyer'])).thenThrows(refused('BUYER_UNKNOWN', 'notice')));
});

describe('redelivery decider: the delivery, or once the personal data is gone, the notice', () => {
  const { given } = deciderSpec(redeliveryDecider);
  const redeliver = (ms: number) => ({ type: 'RequestRedelivery' as const, request: request(ms) });

  it('an erased lead whose notice failed for good: the notice is re-opened, not refused DELIVERY_CANCELLED', () =>
    given(...noticeFailedForGood).when(redeliver(60_000)).then([requested(2, 2, 60_000)]));
  it('an erased lead whose notice was sent: NOT_FAILED, of the notice', () =>
    given(received, sold, attempted, delivered, erased(), noticeSent(1)).when(redeliver(60_000)).thenThrows(refused('NOT_FAILED', 'notice')));
  it('an erased lead with no notice: DELIVERY_CANCELLED, nothing left to send', () =>
    given(received, sold, erased(null)).when(redeliver(60_000)).thenThrows(refused('DELIVERY_CANCELLED', 'delivery')));
  it('returned, then erased: its buyer received it, so its failed notice is re-opened', () => {
    const returned: LeadEvent = { type: 'LeadReturned', data: { lead_id: 7, buyer: BUYER, revenue: 31.25, currency: 'USD', reason: 'bad_phone', returned_at: at(5) } };
    return given(received, sold, attempted, delivered, returned, erased(), noticeFailed(1, null)).when(redeliver(60_000)).then([requested(2, 1, 60_000)]);
  });
  it('a delivery failed for good, not erased: the delivery is re-opened, as before', () =>
    given(received, sold, attempted, { type: 'LeadDeliveryFailed', data: { lead_id: 7, buyer: BUYER, attempt: 1, status: 401, latency_ms: 5, error: 'http_4xx', next_attempt_at: null, failed_at: at(2) } })
      .when(redeliver(60_000))
      .then([{ type: 'LeadRedeliveryRequested', data: { lead_id: 7, buyer: BUYER, round: 2, attempts: 1, requested_by: { role: 'admin', name: 'ops' }, reason: 'buyer_outage', requested_at: at(60_000) } }]));
  it('a test lead, or none: NOT_FOUND, of the delivery', async () => {
    await given().when(redeliver(1)).thenThrows(refused('NOT_FOUND', 'delivery'));
    const test = { ...received, data: { ...received.data, test: true } } as LeadEvent;
    await given(test, sold, erased()).when(redeliver(1)).thenThrows(refused('NOT_FOUND', 'delivery'));
  });
});
