import { expect } from 'chai';
import { AfterSaleError, type AfterSaleRequest, afterSaleDecider } from '../../src/commands/after-sale.js';
import { capDecider } from '../../src/commands/caps.js';
import { type ContactEvent, contactDecider } from '../../src/commands/contacts.js';
import { IDEMPOTENCY_TTL_MS, IN_FLIGHT_STALE_MS, idempotencyDecider } from '../../src/commands/idempotency.js';
import { leadIdBlocksDecider } from '../../src/commands/lead-ids.js';
import { pingDecider } from '../../src/commands/ping/decider.js';
import { RedeliveryRefusedError, deliveryDecider } from '../../src/delivery/attempt.js';
import type { LeadEvent } from '../../src/events/lead-events.js';
import { revokeKey } from '../../src/keys/api-keys.js';
import { keysDecider } from '../../src/keys/key-stream.js';
import type { LoadedRoutingConfig } from '../../src/routing/load-config.js';
import { renamesRecorded, runsEnded } from '../../src/personal-data/clear-leads.js';
import { deciderSpec } from '../support/decider-spec.js';

// Each support stream's rules as given(events) / when(command) / then(events): the same deciders
// the command handler runs against the store.

const T0 = new Date('2026-11-21T15:00:00.000Z');
const at = (ms: number) => new Date(T0.getTime() + ms);
const DAY = 86_400_000;

describe('contact stream decider', () => {
  const { given } = deciderSpec(contactDecider);
  const claimed = (lead_id: number, ms = 0): ContactEvent => ({ type: 'ContactClaimed', data: { lead_id, claimed_at: at(ms).toISOString() } });
  const released = (lead_id: number): ContactEvent => ({ type: 'ContactReleased', data: { lead_id, released_at: T0.toISOString() } });
  const claim = (leadId: number, nowMs: number, holds = true) => ({ type: 'ClaimContact' as const, leadId, now: at(nowMs), windowMs: 30 * DAY, holds: async () => holds });

  it('a contact never seen is claimed', () => given().when(claim(2, 0)).then([claimed(2)]));
  it('a contact an accepted lead holds within the window is not claimed: a duplicate', () => given(claimed(1)).when(claim(2, DAY)).thenNothing());
  it('a claim past the window no longer holds', () => given(claimed(1)).when(claim(2, 31 * DAY)).then([claimed(2, 31 * DAY)]));
  it('a claim whose lead was rejected (or never recorded) does not hold', () => given(claimed(1)).when(claim(2, DAY, false)).then([claimed(2, DAY)]));
  it('a released claim does not hold, and its lead is not even looked up', () =>
    given(claimed(1), released(1))
      .when({ ...claim(2, DAY), holds: async () => expect.fail('a released claim needs no lookup') })
      .then([claimed(2, DAY)]));
  it('the holder releases its claim; anyone else releases nothing', async () => {
    await given(claimed(1)).when({ type: 'ReleaseContact', leadId: 1, now: T0 }).then([released(1)]);
    await given(claimed(1)).when({ type: 'ReleaseContact', leadId: 9, now: T0 }).thenNothing();
  });
});

describe('cap period decider', () => {
  const { given } = deciderSpec(capDecider);
  const taken = (lead_id: number) => ({ type: 'CapSlotTaken' as const, data: { lead_id } });
  const given2 = given(taken(1), taken(2));

  const takes = (max: number, ...leadIds: number[]) => ({ type: 'TakeCapSlots' as const, takes: leadIds.map((leadId) => ({ leadId, max })) });
  it('sales that arrive together get the room there is, in order', () => given2.when(takes(3, 3, 4, 5)).then([taken(3)]));
  it('a full cap takes nobody', () => given2.when(takes(2, 3)).thenNothing());
  it('each sale is held to its own cap: one routed after a reload lowered the cap is refused behind one the old cap still takes', async () => {
    await given2.when({ type: 'TakeCapSlots', takes: [{ leadId: 3, max: 10 }, { leadId: 4, max: 2 }, { leadId: 5, max: 10 }] }).then([taken(3), taken(5)]);
    // And the other way round: a raised cap is not held to the lower one of the sale before it.
    await given2.when({ type: 'TakeCapSlots', takes: [{ leadId: 3, max: 2 }, { leadId: 4, max: 3 }] }).then([taken(4)]);
  });
  it('a slot given back is room again', () =>
    given(taken(1), taken(2), { type: 'CapSlotReleased', data: { lead_id: 2 } }).when(takes(2, 3)).then([taken(3)]));
  it('a release records the slot given back', () =>
    given2.when({ type: 'ReleaseCapSlot', leadId: 2 }).then([{ type: 'CapSlotReleased', data: { lead_id: 2 } }]));
  const released = (lead_id: number) => ({ type: 'CapSlotReleased' as const, data: { lead_id } });
  it('a slot is given back once: a retried release records nothing', () => given(taken(1), taken(2), released(2)).when({ type: 'ReleaseCapSlot', leadId: 2 }).thenNothing());
  it('a release recorded twice frees one slot: the cap is never exceeded', () =>
    given(taken(1), taken(2), released(2), released(2)).when(takes(2, 3, 4)).then([taken(3)]));

  const reserved = (block: string, slots: number) => ({ type: 'CapSlotsReserved' as const, data: { block, slots } });
  const returned = (block: string, slots: number) => ({ type: 'CapSlotsReturned' as const, data: { block, slots } });
  const inBlock = (block: string, max: number, ...leadIds: number[]) => ({ ...takes(max, ...leadIds), block });
  it('with room for many, the sales take a block: a 64th of the room left, at most 64', async () => {
    await given2.when(inBlock('b1', 1_000_000, 3)).then([reserved('b1', 64)]);
    await given2.when(inBlock('b1', 642, 3, 4)).then([reserved('b1', 10)]);
  });
  it('the block is sized on the stream as it stands, never on the size an instance thought: near the cap, a slot a sale', async () => {
    // 600 used of 612: 12 left, far from the 128 a block of two needs.
    const nearlyFull = given(reserved('a', 600));
    await nearlyFull.when(inBlock('b1', 612, 3)).then([taken(3)]);
    await nearlyFull.when(inBlock('b1', 612, 3, 4)).then([taken(3), taken(4)]);
  });
  it('a block no larger than the sales waiting is no block: each takes its own slot', () => given2.when(inBlock('b1', 200, 3, 4, 5)).then([taken(3), taken(4), taken(5)]));
  it('each sale is held to its own cap: the block is sized on the lowest', () =>
    given2.when({ type: 'TakeCapSlots', takes: [{ leadId: 3, max: 1_000_000 }, { leadId: 4, max: 130 }], block: 'b1' }).then([taken(3), taken(4)]));
  it("a block's slots are used until given back: a sale finds the cap full behind a block, and room once the block's unused slots return", async () => {
    await given(taken(1), reserved('b1', 4)).when(takes(5, 7)).thenNothing();
    await given(taken(1), reserved('b1', 4), returned('b1', 3)).when(takes(5, 7)).then([taken(7)]);
  });
  it('a block is given back once: a retried return records nothing, and one recorded twice frees its slots once', async () => {
    await given(reserved('b1', 4), returned('b1', 4)).when({ type: 'ReturnCapSlots', block: 'b1', slots: 4 }).thenNothing();
    await given(reserved('b1', 4), returned('b1', 4), returned('b1', 4), reserved('b2', 1)).when(takes(2, 7, 8)).then([taken(7)]);
  });
});

describe('idempotency key decider', () => {
  const { given } = deciderSpec(idempotencyDecider);
  const answer = { outcome: { lead_id: 1, code: 'SOLD', lead_status: 'sold', sold: true, revenue: 10, currency: 'USD' }, traceId: 't'.repeat(32) } as const;
  const claimedAt = (ms: number, request_hash = 'h1') => ({ type: 'IdempotencyKeyClaimed' as const, data: { request_hash, at: at(ms).toISOString() } });
  const answered = (ms: number) => ({ type: 'IdempotentResponseRecorded' as const, data: { at: at(ms).toISOString(), outcome: answer.outcome, trace_id: answer.traceId } });
  const claim = (nowMs: number) => ({ type: 'ClaimIdempotencyKey' as const, hash: 'h1', now: at(nowMs).getTime() });

  it('a new key is claimed', () => given().when(claim(0)).then([claimedAt(0)]));
  it('a key in flight is not claimed again', () => given(claimedAt(0)).when(claim(1000)).thenNothing());
  it('a claim gone stale (its process died) is taken over', () =>
    given(claimedAt(0)).when(claim(IN_FLIGHT_STALE_MS + 1)).then([claimedAt(IN_FLIGHT_STALE_MS + 1)]));
  it('an answered key replays for its lifetime, then is free again', async () => {
    await given(claimedAt(0), answered(10)).when(claim(IDEMPOTENCY_TTL_MS - 1)).thenNothing();
    await given(claimedAt(0), answered(10)).when(claim(IDEMPOTENCY_TTL_MS + 1)).then([claimedAt(IDEMPOTENCY_TTL_MS + 1)]);
  });
  it('its own claim is completed with the response, or released', async () => {
    const claimedTime = at(0).getTime();
    await given(claimedAt(0)).when({ type: 'CompleteIdempotencyKey', claimedAt: claimedTime, now: at(10).getTime(), answer }).then([answered(10)]);
    await given(claimedAt(0))
      .when({ type: 'ReleaseIdempotencyKey', claimedAt: claimedTime, now: at(10).getTime() })
      .then([{ type: 'IdempotencyKeyReleased', data: { at: at(10).toISOString() } }]);
  });
  it('a claim taken over by another request is no longer this one to complete', () =>
    given(claimedAt(0), claimedAt(IN_FLIGHT_STALE_MS + 1)).when({ type: 'CompleteIdempotencyKey', claimedAt: at(0).getTime(), now: at(IN_FLIGHT_STALE_MS + 2).getTime(), answer }).thenNothing());
});

describe('lead-id block decider', () => {
  const { given } = deciderSpec(leadIdBlocksDecider);
  const block = (from: number, to: number, instance = 'a') => ({ type: 'LeadIdBlockReserved' as const, data: { from, to, instance } });

  it('the first block starts at 1', () => given().when({ blockSize: 100, instance: 'a' }).then([block(1, 100)]));
  it('the next block starts after the highest any instance reserved', () =>
    given(block(1, 100), block(101, 150, 'b')).when({ blockSize: 100, instance: 'a' }).then([block(151, 250)]));
});

describe('api-keys decider', () => {
  const { given } = deciderSpec(keysDecider);
  const issued = { type: 'ApiKeyIssued' as const, data: { id: 'abcdefabcdef', role: 'buyer' as const, name: 'acme-law', hash: 'x'.repeat(64), issued_at: T0.toISOString() } };

  it('revoking an active key records it; revoking it again records nothing', async () => {
    const revoke = (state: Parameters<typeof revokeKey>[0]) => revokeKey(state, { id: 'abcdefabcdef', now: T0.getTime() });
    await given(issued).when(revoke).then([{ type: 'ApiKeyRevoked', data: { id: 'abcdefabcdef', revoked_at: T0.toISOString() } }]);
    await given(issued, { type: 'ApiKeyRevoked', data: { id: 'abcdefabcdef', revoked_at: T0.toISOString() } }).when(revoke).thenNothing();
  });
});

// A sold lead's stream, as the delivery worker and the buyer's requests see it.
const received = {
  type: 'LeadReceived' as const,
  data: {
    lead_id: 7, supplier: 'sup-1', key_id: 'k1', sid: 'src-1', s1: null, accident_state: 'CA', test: false, lead: null, received_at: T0.toISOString(),
  },
};
const sold = { type: 'LeadSold' as const, data: { lead_id: 7, buyer: 'hook-buyer', revenue: 31.25, currency: 'USD', sold_at: T0.toISOString() } };
const saleEvents: LeadEvent[] = [received, sold];

describe('delivery decider', () => {
  const { given } = deciderSpec(deliveryDecider);
  const context = (nowMs: number) => ({ now: at(nowMs), maxAttempts: 2, lostAfterMs: 10_000 });
  const attempted = (attempt: number, ms = 0): LeadEvent => ({
    type: 'LeadDeliveryAttempted', data: { lead_id: 7, buyer: 'hook-buyer', attempt, started_at: at(ms).toISOString(), timeout_ms: 1000 },
  });
  const lost = (attempt: number, nowMs: number, final: boolean): LeadEvent => ({
    type: 'LeadDeliveryFailed',
    data: { lead_id: 7, buyer: 'hook-buyer', attempt, status: null, latency_ms: null, error: 'attempt_lost', next_attempt_at: final ? null : at(nowMs).toISOString(), failed_at: at(nowMs).toISOString() },
  });
  const deliveredData = { lead_id: 7, buyer: 'hook-buyer', via: 'webhook' as const, attempt: 1, status: 200, latency_ms: 5, delivered_at: at(100).toISOString() };
  const delivered: LeadEvent = { type: 'LeadDelivered', data: deliveredData };

  it('a fresh sale claims attempt 1', () => given(...saleEvents).when({ type: 'ClaimAttempt', context: context(0), timeoutMs: 1000 }).then([attempted(1)]));
  it('an attempt in flight is not claimed again', () => given(...saleEvents, attempted(1)).when({ type: 'ClaimAttempt', context: context(500), timeoutMs: 1000 }).thenNothing());
  it('an attempt lost in a crash is recorded as lost and the next one claimed', () =>
    given(...saleEvents, attempted(1)).when({ type: 'ClaimAttempt', context: context(20_000), timeoutMs: 1000 }).then([lost(1, 20_000, false), { ...attempted(2, 20_000) }]));
  it('a lost last attempt gives up', () =>
    given(...saleEvents, attempted(1), lost(1, 1, false), attempted(2)).when({ type: 'ClaimAttempt', context: context(20_000), timeoutMs: 1000 }).then([lost(2, 20_000, true)]));
  const returned: LeadEvent = { type: 'LeadReturned', data: { lead_id: 7, buyer: 'hook-buyer', revenue: 31.25, currency: 'USD', reason: 'bad_phone', returned_at: at(5).toISOString() } };
  const failedOnce: LeadEvent = {
    type: 'LeadDeliveryFailed',
    data: { lead_id: 7, buyer: 'hook-buyer', attempt: 1, status: 503, latency_ms: 5, error: 'http_5xx', next_attempt_at: at(10).toISOString(), failed_at: at(1).toISOString() },
  };
  it('a retry due for a lead its buyer returned (and no cancellation recorded) is cancelled, not sent', () =>
    given(...saleEvents, attempted(1), failedOnce, returned)
      .when({ type: 'ClaimAttempt', context: context(20_000), timeoutMs: 1000 })
      .then([{ type: 'LeadDeliveryCancelled', data: { lead_id: 7, buyer: 'hook-buyer', bucket: null, attempts: 1, reason: 'returned', cancelled_at: at(20_000).toISOString() } }]));
  it('an attempt lost after its buyer returned the lead is the final failure: nothing is sent again', () =>
    given(...saleEvents, attempted(1), returned).when({ type: 'ClaimAttempt', context: context(20_000), timeoutMs: 1000 }).then([lost(1, 20_000, true)]));
  it('an attempt that fails after its delivery was cancelled ends it: recorded with no next attempt, marked cancelled; one that lands is delivered', async () => {
    const cancelled: LeadEvent = {
      type: 'LeadDeliveryCancelled',
      data: { lead_id: 7, buyer: 'hook-buyer', bucket: null, attempts: 1, reason: 'returned', cancelled_at: at(5).toISOString() },
    };
    const failure = { ...failedOnce.data, failed_at: at(1000).toISOString() };
    await given(...saleEvents, attempted(1), returned, cancelled)
      .when({ type: 'RecordOutcome', attempt: 1, outcome: { type: 'LeadDeliveryFailed', data: failure } })
      .then([{ type: 'LeadDeliveryFailed', data: { ...failure, next_attempt_at: null, cancelled: true } }]);
    const outcome = { type: 'LeadDelivered', data: deliveredData } as const;
    await given(...saleEvents, attempted(1), returned, cancelled).when({ type: 'RecordOutcome', attempt: 1, outcome }).then([delivered]);
    // Ended so, the delivery is no failure an admin could send again: it stays cancelled.
    const ended: LeadEvent = { type: 'LeadDeliveryFailed', data: { ...failure, next_attempt_at: null, cancelled: true } };
    const request = { requestedBy: { role: 'admin', name: 'ops' }, reason: null, now: at(2000), buyerKnown: () => true };
    expect(() => deliveryDecider.decide({ type: 'RequestRedelivery', request }, [...saleEvents, attempted(1), cancelled, ended].reduce(deliveryDecider.evolve, deliveryDecider.initialState)))
      .to.throw().with.property('code', 'DELIVERY_CANCELLED');
  });

  it('the outcome of the open attempt is recorded; once settled, nothing more', async () => {
    const outcome = { type: 'LeadDelivered', data: deliveredData } as const;
    await given(...saleEvents, attempted(1)).when({ type: 'RecordOutcome', attempt: 1, outcome }).then([delivered]);
    await given(...saleEvents, attempted(1), delivered).when({ type: 'RecordOutcome', attempt: 1, outcome }).thenNothing();
  });
});

describe('delivery decider: sending a delivery that failed for good again', () => {
  const { given } = deciderSpec(deliveryDecider);
  const attempted = (attempt: number, ms = 0): LeadEvent => ({
    type: 'LeadDeliveryAttempted', data: { lead_id: 7, buyer: 'hook-buyer', attempt, started_at: at(ms).toISOString(), timeout_ms: 1000 },
  });
  const failed = (attempt: number, next: string | null, ms = 0): LeadEvent => ({
    type: 'LeadDeliveryFailed',
    data: { lead_id: 7, buyer: 'hook-buyer', attempt, status: next ? 503 : 401, latency_ms: 5, error: next ? 'http_5xx' : 'http_4xx', next_attempt_at: next, failed_at: at(ms).toISOString() },
  });
  const requested = (round: number, attempts: number, ms: number, reason: string | null = 'secret_rotated'): LeadEvent => ({
    type: 'LeadRedeliveryRequested',
    data: { lead_id: 7, buyer: 'hook-buyer', round, attempts, requested_by: { role: 'admin', name: 'ops' }, reason, requested_at: at(ms).toISOString() },
  });
  const redeliver = (ms: number, reason: string | null = 'secret_rotated', buyers = ['hook-buyer']) => ({
    type: 'RequestRedelivery' as const, request: { requestedBy: { role: 'admin', name: 'ops' }, reason, now: at(ms), buyerKnown: (buyer: string) => buyers.includes(buyer) },
  });
  const claim = (ms: number) => ({ type: 'ClaimAttempt' as const, context: { now: at(ms), maxAttempts: 2, lostAfterMs: 10_000 }, timeoutMs: 1000 });
  const refused = (code: string) => (error: unknown) => {
    expect(error).to.be.instanceOf(RedeliveryRefusedError);
    expect((error as RedeliveryRefusedError).code).to.equal(code);
  };
  const failedForGood = [...saleEvents, attempted(1), failed(1, at(1).toISOString()), attempted(2, 2), failed(2, null, 3)];

  it('a delivery failed for good is re-opened: round 2, after the attempts made, due at the request', () =>
    given(...failedForGood).when(redeliver(60_000)).then([requested(2, 2, 60_000)]));
  it('no reason given: none recorded', () => given(...failedForGood).when(redeliver(60_000, null)).then([requested(2, 2, 60_000, null)]));
  it('re-opened, the next attempt is claimed at once, numbered after the last', () =>
    given(...failedForGood, requested(2, 2, 60_000)).when(claim(60_000)).then([attempted(3, 60_000)]));
  it('a second round failed for good is re-opened as round 3', () =>
    given(...failedForGood, requested(2, 2, 60_000), attempted(3, 60_000), failed(3, null, 60_001)).when(redeliver(70_000)).then([requested(3, 3, 70_000)]));
  it('the new round has the whole budget: a lost first attempt of it is retried, not the final failure', () =>
    given(...failedForGood, requested(2, 2, 60_000), attempted(3, 60_000))
      .when(claim(80_000))
      .then([
        { type: 'LeadDeliveryFailed', data: { lead_id: 7, buyer: 'hook-buyer', attempt: 3, status: null, latency_ms: null, error: 'attempt_lost', next_attempt_at: at(80_000).toISOString(), failed_at: at(80_000).toISOString() } },
        attempted(4, 80_000),
      ]));
  it("a lost last attempt of the new round's budget is the final failure", () =>
    given(...failedForGood, requested(2, 2, 60_000), attempted(3, 60_000), failed(3, at(60_001).toISOString(), 60_001), attempted(4, 60_001))
      .when(claim(80_000))
      .then([{ type: 'LeadDeliveryFailed', data: { lead_id: 7, buyer: 'hook-buyer', attempt: 4, status: null, latency_ms: null, error: 'attempt_lost', next_attempt_at: null, failed_at: at(80_000).toISOString() } }]));
  it('a buyer the routing file no longer has: BUYER_UNKNOWN, since no worker would send it', () =>
    given(...failedForGood).when(redeliver(60_000, 'secret_rotated', ['another-buyer'])).thenThrows(refused('BUYER_UNKNOWN')));
  it('a delivery re-opened already (two requests at once): NOT_FAILED, nothing recorded', () =>
    given(...failedForGood, requested(2, 2, 60_000)).when(redeliver(60_001)).thenThrows(refused('NOT_FAILED')));
  it('pending, in flight or delivered: NOT_FAILED', async () => {
    await given(...saleEvents).when(redeliver(1)).thenThrows(refused('NOT_FAILED'));
    await given(...saleEvents, attempted(1), failed(1, at(5).toISOString())).when(redeliver(1)).thenThrows(refused('NOT_FAILED'));
    await given(...saleEvents, attempted(1)).when(redeliver(1)).thenThrows(refused('NOT_FAILED'));
    const delivered: LeadEvent = { type: 'LeadDelivered', data: { lead_id: 7, buyer: 'hook-buyer', via: 'webhook', attempt: 1, status: 200, latency_ms: 5, delivered_at: T0.toISOString() } };
    await given(...saleEvents, attempted(1), delivered).when(redeliver(1)).thenThrows(refused('NOT_FAILED'));
  });
  it("a pull buyer's lead never fails: NOT_FAILED, before and after its acknowledgement", async () => {
    await given(...saleEvents).when(redeliver(1)).thenThrows(refused('NOT_FAILED'));
    const pulled: LeadEvent = { type: 'LeadDelivered', data: { lead_id: 7, buyer: 'hook-buyer', via: 'pull', attempt: 1, status: null, latency_ms: null, delivered_at: T0.toISOString() } };
    await given(...saleEvents, pulled).when(redeliver(1)).thenThrows(refused('NOT_FAILED'));
  });
  it("erased or expired: DELIVERY_CANCELLED, there is nothing left to send", async () => {
    const erased: LeadEvent = { type: 'LeadPersonalDataErased', data: { lead_id: 7, erasure_id: 'e'.repeat(32), had_delivery: true, notify_buyer: 'hook-buyer', erased_at: at(9).toISOString() } };
    const expired: LeadEvent = { type: 'LeadPersonalDataExpired', data: { lead_id: 7, retention_days: 30, had_delivery: true, notify_buyer: null, expired_at: at(9).toISOString() } };
    await given(...failedForGood, erased).when(redeliver(10)).thenThrows(refused('DELIVERY_CANCELLED'));
    await given(...failedForGood, expired).when(redeliver(10)).thenThrows(refused('DELIVERY_CANCELLED'));
  });
  it('returned by the buyer: ALREADY_RETURNED, a buyer that sent it back does not want it', () =>
    given(...failedForGood, { type: 'LeadReturned', data: { lead_id: 7, buyer: 'hook-buyer', revenue: 31.25, currency: 'USD', reason: 'bad_phone', returned_at: at(9).toISOString() } })
      .when(redeliver(10))
      .thenThrows(refused('ALREADY_RETURNED')));
  it('not sold, a test lead, no lead at all: NOT_FOUND', async () => {
    await given().when(redeliver(1)).thenThrows(refused('NOT_FOUND'));
    await given(received).when(redeliver(1)).thenThrows(refused('NOT_FOUND'));
    const test = { ...received, data: { ...received.data, test: true } };
    await given(test, sold).when(redeliver(1)).thenThrows(refused('NOT_FOUND'));
  });
});

describe('after-sale decider (acknowledgements, feedback, returns)', () => {
  const { given } = deciderSpec(afterSaleDecider);
  const request = (role: string, name: string, nowMs = 1000): AfterSaleRequest => ({ principal: { role, name, keyId: 'k9' }, traceId: 't'.repeat(32), now: at(nowMs) });
  const routing = { buyers: [{ id: 'hook-buyer', return_reasons: ['bad_phone'], return_window_days: 7, delivery: { kind: 'pull' } }] } as unknown as LoadedRoutingConfig;
  const byWebhook = { buyers: [{ id: 'hook-buyer', delivery: { kind: 'webhook', url: 'https://buyer.example/leads' } }] } as unknown as LoadedRoutingConfig;
  const feedback = (type: string, reason?: string, nowMs = 1000) => ({
    type: 'RecordFeedback' as const, leadId: 7, request: request('buyer', 'hook-buyer', nowMs), routing, body: reason ? { type, reason } : { type },
  });
  const code = (expected: string) => (error: unknown) => expect((error as AfterSaleError).code).to.equal(expected);
  const recorded = (type: string, reason: string | null, nowMs = 1000): LeadEvent => ({
    type: 'FeedbackRecorded', data: { lead_id: 7, buyer: 'hook-buyer', type: type as never, reason, recorded_at: at(nowMs).toISOString() },
  });

  it('the buyer acknowledges a pulled lead once', async () => {
    const ack = { type: 'AcknowledgeDelivery' as const, leadId: 7, request: request('buyer', 'hook-buyer'), routing };
    const ackd: LeadEvent = { type: 'LeadDelivered', data: { lead_id: 7, buyer: 'hook-buyer', via: 'pull', attempt: 1, status: null, latency_ms: null, delivered_at: at(1000).toISOString() } };
    await given(...saleEvents).when(ack).then([ackd]);
    await given(...saleEvents, ackd).when(ack).thenNothing();
  });
  it("a webhook buyer's lead is not acknowledged, not even by an admin: the worker delivers it", async () => {
    await given(...saleEvents).when({ type: 'AcknowledgeDelivery', leadId: 7, request: request('buyer', 'hook-buyer'), routing: byWebhook }).thenThrows(code('NOT_PULLED'));
    await given(...saleEvents).when({ type: 'AcknowledgeDelivery', leadId: 7, request: request('admin', 'root'), routing: byWebhook }).thenThrows(code('NOT_PULLED'));
  });
  it('another buyer, a supplier or an unsold lead: not found or forbidden', async () => {
    await given(...saleEvents).when({ type: 'AcknowledgeDelivery', leadId: 7, request: request('buyer', 'other'), routing }).thenThrows(code('NOT_FOUND'));
    await given(received).when(feedback('conversion')).thenThrows(code('NOT_FOUND'));
    await given(...saleEvents).when({ ...feedback('conversion'), request: request('supplier', 'sup-1') }).thenThrows(code('FORBIDDEN'));
  });
  it('a conversion is recorded; a return also reverses the revenue', async () => {
    await given(...saleEvents).when(feedback('conversion')).then([recorded('conversion', null)]);
    const pulled: LeadEvent = { type: 'LeadDelivered', data: { lead_id: 7, buyer: 'hook-buyer', via: 'pull', attempt: 1, status: null, latency_ms: null, delivered_at: at(500).toISOString() } };
    await given(...saleEvents, pulled)
      .when(feedback('return', 'bad_phone'))
      .then([
        recorded('return', 'bad_phone'),
        { type: 'LeadReturned', data: { lead_id: 7, buyer: 'hook-buyer', revenue: 31.25, currency: 'USD', reason: 'bad_phone', returned_at: at(1000).toISOString() } },
      ]);
  });
  describe('a return of a lead not delivered yet cancels its delivery', () => {
    const attempted: LeadEvent = { type: 'LeadDeliveryAttempted', data: { lead_id: 7, buyer: 'hook-buyer', attempt: 1, started_at: at(1).toISOString(), timeout_ms: 1000 } };
    const failed = (next: string | null): LeadEvent => ({
      type: 'LeadDeliveryFailed',
      data: { lead_id: 7, buyer: 'hook-buyer', attempt: 1, status: next ? 503 : 401, latency_ms: 5, error: next ? 'http_5xx' : 'http_4xx', next_attempt_at: next, failed_at: at(2).toISOString() },
    });
    const returnedAt = (nowMs: number) => [
      recorded('return', 'bad_phone', nowMs),
      { type: 'LeadReturned', data: { lead_id: 7, buyer: 'hook-buyer', revenue: 31.25, currency: 'USD', reason: 'bad_phone', returned_at: at(nowMs).toISOString() } },
    ] as LeadEvent[];
    const cancelled = (attempts: number): LeadEvent => ({
      type: 'LeadDeliveryCancelled', data: { lead_id: 7, buyer: 'hook-buyer', bucket: null, attempts, reason: 'returned', cancelled_at: at(1000).toISOString() },
    });

    it('a webhook retry still due: returned, and never sent', () => given(...saleEvents, attempted, failed(at(60_000).toISOString())).when(feedback('return', 'bad_phone')).then([...returnedAt(1000), cancelled(1)]));
    it('a pulled lead not acknowledged: returned, and its acknowledgement refused from then on', async () => {
      await given(...saleEvents).when(feedback('return', 'bad_phone')).then([...returnedAt(1000), cancelled(0)]);
      const ack = { type: 'AcknowledgeDelivery' as const, leadId: 7, request: request('buyer', 'hook-buyer'), routing };
      await given(...saleEvents, ...returnedAt(1000), cancelled(0)).when(ack).thenThrows(code('DELIVERY_CANCELLED'));
    });
    it('a pulled lead an older release recorded returned without cancelling its delivery: an acknowledgement cancels it (and is then refused), never delivers it', async () => {
      const ack = { type: 'AcknowledgeDelivery' as const, leadId: 7, request: request('buyer', 'hook-buyer', 2000), routing };
      await given(...saleEvents, ...returnedAt(1000))
        .when(ack)
        .then([{ type: 'LeadDeliveryCancelled', data: { lead_id: 7, buyer: 'hook-buyer', bucket: null, attempts: 0, reason: 'returned', cancelled_at: at(2000).toISOString() } }]);
      await given(...saleEvents, ...returnedAt(1000), cancelled(0)).when(ack).thenThrows(code('DELIVERY_CANCELLED'));
    });
    it('delivered, or failed for good: returned, the delivery as it was', async () => {
      const delivered: LeadEvent = { type: 'LeadDelivered', data: { lead_id: 7, buyer: 'hook-buyer', via: 'webhook', attempt: 1, status: 200, latency_ms: 5, delivered_at: at(2).toISOString() } };
      await given(...saleEvents, attempted, delivered).when(feedback('return', 'bad_phone')).then(returnedAt(1000));
      await given(...saleEvents, attempted, failed(null)).when(feedback('return', 'bad_phone')).then(returnedAt(1000));
    });
  });
  it('a return needs an allowed reason, comes once and within the window', async () => {
    await given(...saleEvents).when(feedback('return', 'fraud')).thenThrows(code('INVALID'));
    await given(...saleEvents, { type: 'LeadReturned', data: { lead_id: 7, buyer: 'hook-buyer', revenue: 31.25, currency: 'USD', reason: 'bad_phone', returned_at: T0.toISOString() } })
      .when(feedback('return', 'bad_phone'))
      .thenThrows(code('ALREADY_RETURNED'));
    await given(...saleEvents).when(feedback('return', 'bad_phone', 8 * DAY)).thenThrows(code('RETURN_WINDOW_CLOSED'));
  });
});

describe('ping decider: a post taken back', () => {
  const { given } = deciderSpec(pingDecider);
  const source = { ping_id: 'p1', supplier: 'sup', sid: 's', accident_state: 'CA', test: false, pinged_at: T0.toISOString() };
  const pinged = { type: 'LeadPinged' as const, data: { ...source, key_id: 'k', zip: '90210', s1: null, expires_at: at(300_000).toISOString() } };
  const collected = { type: 'PingBidsCollected' as const, data: { ...source, bids: [], winner: { buyer: 'b', amount: 5 }, currency: 'USD', collected_at: T0.toISOString() } };
  const posted = (lead_id: number) => ({ type: 'PingPosted' as const, data: { ...source, lead_id, buyer: 'b', amount: 5, posted_at: at(1000).toISOString() } });
  const released = (lead_id: number) => ({ type: 'PingPostReleased' as const, data: { ...source, lead_id, buyer: 'b', amount: 5, released_at: at(2000).toISOString() } });

  it('the post whose lead was not recorded is taken back, with its buyer and bid', () =>
    given(pinged, collected, posted(7)).when({ type: 'ReleasePing', leadId: 7, now: at(2000) }).then([released(7)]));
  it("another lead's post is not taken back, and nothing is taken back twice", async () => {
    await given(pinged, collected, posted(8)).when({ type: 'ReleasePing', leadId: 7, now: at(2000) }).thenNothing();
    await given(pinged, collected, posted(7), released(7)).when({ type: 'ReleasePing', leadId: 7, now: at(3000) }).thenNothing();
  });
  it('a ping taken back is posted again at once', () =>
    given(pinged, collected, posted(7), released(7))
      .when({ type: 'PostPing', leadId: 9, buyer: 'b', amount: 5, now: at(3000) })
      .then([{ type: 'PingPosted', data: { ...source, lead_id: 9, buyer: 'b', amount: 5, posted_at: at(3000).toISOString() } }]));
});

describe('the records of `leadpost seal-clear-leads`', () => {
  const keyed = { type: 'ContactHashesKeyed', data: { keyed_at: T0.toISOString(), older_streams: true } };
  const renamed = (streams: number) => ({ type: 'OlderStreamsRenamed', data: { renamed_at: T0.toISOString(), streams } });

  describe('the renames of older streams', () => {
    const { given } = deciderSpec(renamesRecorded);
    it('are recorded after the record of keyed names', () => given(keyed).when({ renamed: renamed(3) }).then([renamed(3)]));
    it('are recorded once: a later run, or one that raced this one, adds nothing', () => given(keyed, renamed(3)).when({ renamed: renamed(0) }).thenNothing());
  });

  describe('the end of a run', () => {
    const { given } = deciderSpec(runsEnded);
    const ended = (sealed: number) => ({ type: 'ClearLeadsSealed' as const, data: { sealed, shredded: 0, renamed: 0, unreadable: 0, sealed_at: T0.toISOString() } });
    it('is recorded for every run, the first and each later one', async () => {
      await given().when({ ended: ended(5) }).then([ended(5)]);
      await given(ended(5)).when({ ended: ended(0) }).then([ended(0)]);
    });
  });
});
