import { createHmac } from 'node:crypto';
import { expect } from 'chai';
import { type StreamEvent, type WireResult, foldDelivery, nextStep, outcomeOf } from '../../src/delivery/attempt.js';
import { MAX_BACKOFF_MS, backoffMs } from '../../src/delivery/backoff.js';
import { deliveryBody, deliveryHeaders } from '../../src/delivery/payload.js';
import { retryAfterMs } from '../../src/delivery/retry-after.js';
import { signDelivery, verifyDelivery } from '../../src/delivery/signature.js';
import type { LeadReceived, LeadSold } from '../../src/events/lead-events.js';
import type { NormalisedLead } from '../../src/leads/lead.js';

// The decisions of a delivery attempt on plain events: no store, no network.

const T0 = new Date('2026-03-02T10:00:00.000Z');
const at = (ms: number) => new Date(T0.getTime() + ms);

const received: LeadReceived['data'] = {
  lead_id: 7, supplier: 'sup-1', key_id: 'k1', sid: 'src-1', s1: 'click-1', accident_state: 'CA', test: false, received_at: T0.toISOString(),
  lead: {
    first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com', mobile: '+12135550143', mobile_national: '2135550143', zip: '90210',
    zip4: null, accident_state: 'CA', certificate_url: 'https://cert.trustedform.com/abc', certificate_id: 'abc', sid: 'src-1', s1: 'click-1', test: false,
  },
};
const sale: LeadSold['data'] = { lead_id: 7, buyer: 'hook-buyer', revenue: 31.25, currency: 'USD', sold_at: T0.toISOString() };

function stream(...rest: Array<{ type: string; data: unknown }>): StreamEvent[] {
  const events = [{ type: 'LeadReceived', data: received }, { type: 'LeadRouted', data: {} }, { type: 'LeadSold', data: sale }, ...rest];
  return events.map((e, revision) => ({ ...e, revision, metadata: { trace_id: 'trace-1' } }));
}
const attempted = (attempt: number, startedMs = 0, timeout_ms = 1000) => ({
  type: 'LeadDeliveryAttempted', data: { lead_id: 7, buyer: 'hook-buyer', attempt, started_at: at(startedMs).toISOString(), timeout_ms },
});
const failed = (attempt: number, next: string | null) => ({
  type: 'LeadDeliveryFailed',
  data: { lead_id: 7, buyer: 'hook-buyer', attempt, status: 503, latency_ms: 5, error: 'http_5xx', next_attempt_at: next, failed_at: T0.toISOString() },
});
const delivered = (attempt: number) => ({
  type: 'LeadDelivered', data: { lead_id: 7, buyer: 'hook-buyer', via: 'webhook', attempt, status: 200, latency_ms: 5, delivered_at: T0.toISOString() },
});
const ctx = (nowMs = 0, maxAttempts = 3) => ({ now: at(nowMs), maxAttempts, lostAfterMs: 10_000 });

describe('delivery: folding a lead stream', () => {
  it('a fresh sale: nothing attempted, due now, the trace of the sale kept', () => {
    const state = foldDelivery(stream());
    expect(state).to.include({ lastAttempt: 0, open: null, delivered: false, failedFinally: false, nextAttemptAt: null, traceId: 'trace-1' });
    expect(state.sale).to.deep.equal(sale);
    expect(nextStep(state, ctx())).to.deep.equal({ kind: 'send', attempt: 1, lost: null });
  });

  it('an attempt claimed and not answered yet is in flight: nobody else sends', () => {
    const state = foldDelivery(stream(attempted(1)));
    expect(state.open).to.deep.equal({ attempt: 1, started_at: T0.toISOString(), timeout_ms: 1000 });
    expect(nextStep(state, ctx(5000))).to.deep.equal({ kind: 'skip', reason: 'in_flight' });
  });

  it('a claim with no outcome past its time box and the grace is lost: recorded as such, the next number is claimed', () => {
    const state = foldDelivery(stream(attempted(1)));
    const step = nextStep(state, ctx(11_000));
    expect(step).to.deep.include({ kind: 'send', attempt: 2 });
    expect(step.kind === 'send' && step.lost).to.deep.include({ attempt: 1, error: 'attempt_lost', status: null, next_attempt_at: at(11_000).toISOString() });
  });

  it('a lost last allowed attempt is the final failure, nothing more is sent', () => {
    const state = foldDelivery(stream(attempted(1), failed(1, at(1).toISOString()), attempted(2), failed(2, at(2).toISOString()), attempted(3)));
    const step = nextStep(state, ctx(60_000));
    expect(step.kind).to.equal('give_up');
    expect(step.kind === 'give_up' && step.lost).to.deep.include({ attempt: 3, error: 'attempt_lost', next_attempt_at: null });
  });

  it('a failure waits for its retry time, even when the read model says due', () => {
    const state = foldDelivery(stream(attempted(1), failed(1, at(2000).toISOString())));
    expect(state).to.include({ lastAttempt: 1, open: null, failedFinally: false });
    expect(nextStep(state, ctx(1999))).to.deep.equal({ kind: 'skip', reason: 'not_due' });
    expect(nextStep(state, ctx(2000))).to.deep.equal({ kind: 'send', attempt: 2, lost: null });
  });

  it('a final failure sent again is due at the request, with a fresh budget, numbered after the last attempt', () => {
    const redelivered = { type: 'LeadRedeliveryRequested', data: { lead_id: 7, buyer: 'hook-buyer', round: 2, attempts: 3, requested_by: { role: 'admin', name: 'ops' }, reason: null, requested_at: at(5000).toISOString() } };
    const failedThrice = [attempted(1), failed(1, at(1).toISOString()), attempted(2), failed(2, at(2).toISOString()), attempted(3), failed(3, null)];
    const state = foldDelivery(stream(...failedThrice, redelivered));
    expect(state).to.include({ failedFinally: false, lastAttempt: 3, round: 2, roundStart: 3, nextAttemptAt: at(5000).toISOString() });
    expect(nextStep(state, ctx(4999))).to.deep.equal({ kind: 'skip', reason: 'not_due' });
    expect(nextStep(state, ctx(5000))).to.deep.equal({ kind: 'send', attempt: 4, lost: null });
    // Attempt 5 lost is the second of the round's three: sent again, not given up.
    const lostSecond = foldDelivery(stream(...failedThrice, redelivered, attempted(4, 5000), failed(4, at(5001).toISOString()), attempted(5, 5001)));
    expect(nextStep(lostSecond, ctx(60_000))).to.deep.include({ kind: 'send', attempt: 6 });
    const lostLast = foldDelivery(stream(...failedThrice, redelivered, attempted(4, 5000), failed(4, at(5001).toISOString()), attempted(5, 5001), failed(5, at(5002).toISOString()), attempted(6, 5002)));
    expect(nextStep(lostLast, ctx(60_000)).kind).to.equal('give_up');
  });

  it('delivered and finally failed leads are left alone', () => {
    expect(nextStep(foldDelivery(stream(attempted(1), delivered(1))), ctx(1e9))).to.deep.equal({ kind: 'skip', reason: 'delivered' });
    expect(nextStep(foldDelivery(stream(attempted(1), failed(1, null))), ctx(1e9))).to.deep.equal({ kind: 'skip', reason: 'failed' });
  });

  it('unsold and test leads are never sent', () => {
    const unsold = [{ type: 'LeadReceived', data: received, revision: 0 }];
    expect(nextStep(foldDelivery(unsold), ctx())).to.deep.equal({ kind: 'skip', reason: 'not_sold' });
    const test = [{ type: 'LeadReceived', data: { ...received, test: true }, revision: 0 }, { type: 'LeadSold', data: sale, revision: 1 }];
    expect(nextStep(foldDelivery(test), ctx())).to.deep.equal({ kind: 'skip', reason: 'test_lead' });
  });

  it('an outcome closes only its own attempt', () => {
    const state = foldDelivery(stream(attempted(1), attempted(2), failed(1, at(0).toISOString())));
    expect(state.open?.attempt).to.equal(2);
    expect(state.lastAttempt).to.equal(2);
  });
});

describe('delivery: outcome of an attempt', () => {
  const outcome = (result: WireResult, attempt = 1, maxAttempts = 3) => outcomeOf(result, { sale, attempt, maxAttempts, now: T0, retryInMs: 2000 });
  /** When a failed attempt's next one is due (null: final); `delivered` if it was not a failure. */
  const nextOf = (result: WireResult, attempt = 1) => {
    const o = outcome(result, attempt);
    return o.type === 'LeadDeliveryFailed' ? o.data.next_attempt_at : 'delivered';
  };

  it('2xx: delivered, with status and latency', () => {
    expect(outcome({ kind: 'response', status: 202, latencyMs: 12.4 })).to.deep.equal({
      type: 'LeadDelivered',
      data: { lead_id: 7, buyer: 'hook-buyer', via: 'webhook', attempt: 1, status: 202, latency_ms: 12, delivered_at: T0.toISOString() },
    });
  });

  it('5xx, timeout and connection errors are retried after the backoff, until the last attempt', () => {
    for (const [result, error] of [
      [{ kind: 'response', status: 503, latencyMs: 3 }, 'http_5xx'],
      [{ kind: 'timeout', latencyMs: 200 }, 'timeout'],
      [{ kind: 'connection_error', latencyMs: 1, code: 'ECONNREFUSED' }, 'connection_error'],
    ] as const) {
      expect(outcome(result, 2).data).to.include({ error, attempt: 2, next_attempt_at: at(2000).toISOString() });
      expect(outcome(result, 3).data).to.include({ error, attempt: 3, next_attempt_at: null });
    }
  });

  it('a status outside 100–599 is no HTTP answer: a connection error with no status, retried, never a class http_6xx or http_0xx', () => {
    for (const status of [600, 999, 99, 0]) {
      expect(outcome({ kind: 'response', status, latencyMs: 3 }, 2).data, String(status)).to.include({
        error: 'connection_error',
        status: null,
        next_attempt_at: at(2000).toISOString(),
      });
    }
  });

  it('4xx is final at once; so is a redirect, which is not followed', () => {
    const rejected = outcome({ kind: 'response', status: 422, latencyMs: 3 });
    expect(rejected.type).to.equal('LeadDeliveryFailed');
    expect(rejected.data).to.include({ error: 'http_4xx', status: 422, next_attempt_at: null });
    expect(outcome({ kind: 'response', status: 301, latencyMs: 3 }).data).to.include({ error: 'http_3xx', next_attempt_at: null });
    for (const status of [400, 401, 403, 404, 409, 410, 413, 302]) {
      expect(outcome({ kind: 'response', status, latencyMs: 3 }).data, String(status)).to.include({ status, next_attempt_at: null });
    }
  });

  it('408, 425 and 429 say "not now", like a 503: retried after the backoff, until the last attempt', () => {
    for (const status of [408, 425, 429, 500, 503]) {
      expect(outcome({ kind: 'response', status, latencyMs: 3 }, 1).data, String(status)).to.include({ status, attempt: 1, next_attempt_at: at(2000).toISOString() });
      expect(outcome({ kind: 'response', status, latencyMs: 3 }, 3).data, String(status)).to.include({ status, attempt: 3, next_attempt_at: null });
    }
  });

  it('Retry-After in seconds or as an HTTP-date sets the next attempt instead of the backoff', () => {
    const answer = (status: number, retryAfter: string | null) => nextOf({ kind: 'response', status, latencyMs: 3, retryAfter });
    expect(answer(429, '30')).to.equal(at(30_000).toISOString());
    expect(answer(503, '0')).to.equal(at(0).toISOString());
    expect(answer(429, at(45_000).toUTCString())).to.equal(at(45_000).toISOString());
    expect(answer(408, '1')).to.equal(at(1000).toISOString());
  });

  it('Retry-After is capped at the backoff maximum; missing, garbled, negative or past means the backoff', () => {
    const answer = (retryAfter: string | null) => nextOf({ kind: 'response', status: 429, latencyMs: 3, retryAfter });
    expect(answer('86400')).to.equal(at(MAX_BACKOFF_MS).toISOString());
    expect(answer(at(3_600_000).toUTCString())).to.equal(at(MAX_BACKOFF_MS).toISOString());
    for (const value of [null, '', 'soon', '-5', '1.5', '2 s', at(-1000).toUTCString(), 'Mon, 31 Feb 2026 10:00:00 GMT']) {
      expect(answer(value), String(value)).to.equal(at(2000).toISOString());
    }
  });

  it("a redelivered round counts its attempts from the round's start: retried until the buyer's max_attempts more", () => {
    const inRound = (attempt: number) => outcomeOf({ kind: 'response', status: 503, latencyMs: 3 }, { sale, attempt, maxAttempts: 3, roundStart: 5, now: T0, retryInMs: 2000 }).data;
    expect(inRound(6)).to.include({ attempt: 6, next_attempt_at: at(2000).toISOString() });
    expect(inRound(7)).to.include({ attempt: 7, next_attempt_at: at(2000).toISOString() });
    expect(inRound(8)).to.include({ attempt: 8, next_attempt_at: null });
  });

  it("an attempt this service cut short as it stopped is due again, even the last, and not counted in the round's budget", () => {
    const cut = { kind: 'connection_error', latencyMs: 3000, code: 'ABORT_ERR' } as const;
    const judged = (result: WireResult, attempt: number, interruptedBefore = 0) =>
      outcomeOf(result, { sale, attempt, maxAttempts: 3, interrupted: true, interruptedBefore, now: T0, retryInMs: 2000 }).data;
    expect(judged(cut, 3)).to.include({ attempt: 3, error: 'connection_error', interrupted: true, next_attempt_at: at(2000).toISOString() });
    // An answer that came before the cut is the buyer's, and counts as ever.
    expect(judged({ kind: 'response', status: 503, latencyMs: 3 }, 3)).to.include({ next_attempt_at: null }).and.not.have.property('interrupted');
    // After one interrupted attempt, attempt 4 is the round's third counted one: its failure is final.
    const plain = (attempt: number, interruptedBefore: number) =>
      outcomeOf({ kind: 'timeout', latencyMs: 5000 }, { sale, attempt, maxAttempts: 3, interruptedBefore, now: T0, retryInMs: 2000 }).data;
    expect(plain(3, 1)).to.include({ next_attempt_at: at(2000).toISOString() });
    expect(plain(4, 1)).to.include({ next_attempt_at: null });
    // The fold counts the round's interrupted attempts, and a redelivery starts the count again.
    const interrupted = { ...failed(1, at(2000).toISOString()), data: { ...failed(1, at(2000).toISOString()).data, interrupted: true } };
    expect(foldDelivery(stream(attempted(1), interrupted, attempted(2), failed(2, at(4000).toISOString())))).to.include({ interrupted: 1, lastAttempt: 2 });
    const redelivery = { type: 'LeadRedeliveryRequested', data: { lead_id: 7, buyer: 'hook-buyer', round: 2, attempts: 2, requested_by: { role: 'cli' }, reason: null, requested_at: T0.toISOString() } };
    expect(foldDelivery(stream(attempted(1), interrupted, attempted(2), failed(2, null), redelivery))).to.include({ interrupted: 0, roundStart: 2 });
    // A lost attempt after an interrupted one is judged against the counted budget: not the last of 2.
    const lostAfterCut = nextStep(foldDelivery(stream(attempted(1), interrupted, attempted(2, 0, 1000))), ctx(20_000, 2));
    expect(lostAfterCut).to.include({ kind: 'send', attempt: 3 });
  });

  it('Retry-After changes neither a final answer nor the last attempt', () => {
    expect(nextOf({ kind: 'response', status: 404, latencyMs: 3, retryAfter: '5' })).to.equal(null);
    expect(nextOf({ kind: 'response', status: 429, latencyMs: 3, retryAfter: '5' }, 3)).to.equal(null);
  });
});

describe('delivery: reading Retry-After', () => {
  const max = MAX_BACKOFF_MS;

  it('delay-seconds, with the space around it a header may carry', () => {
    expect(retryAfterMs('120', T0, max)).to.equal(120_000);
    expect(retryAfterMs(' 7 ', T0, max)).to.equal(7000);
    expect(retryAfterMs('99999999999999999999', T0, max)).to.equal(max);
  });

  it('all three HTTP-date forms, in GMT whatever the local zone', () => {
    const now = new Date('1994-11-06T08:49:00.000Z');
    expect(retryAfterMs('Sun, 06 Nov 1994 08:49:37 GMT', now, max)).to.equal(37_000);
    expect(retryAfterMs('Sunday, 06-Nov-94 08:49:37 GMT', now, max)).to.equal(37_000);
    expect(retryAfterMs('Sun Nov  6 08:49:37 1994', now, max)).to.equal(37_000);
  });

  it('anything else is no answer', () => {
    for (const value of [undefined, null, '', '-1', '+3', '1e3', '0x10', 'Sun, 06 Nov 1994 08:49:37', '2026-03-02T10:00:05Z', 'Sun, 06 Nov 1994 25:49:37 GMT']) {
      expect(retryAfterMs(value, T0, max), String(value)).to.equal(null);
    }
  });
});

describe('delivery: backoff', () => {
  it('the first retry comes within 5 s', () => {
    for (const r of [0, 0.5, 0.999999]) expect(backoffMs(1, () => r)).to.be.within(1600, 5000);
  });

  it('doubles per attempt with ±20% jitter and never exceeds 5 min', () => {
    expect(backoffMs(3, () => 0.5)).to.equal(8000);
    expect(backoffMs(3, () => 0)).to.equal(6400);
    expect(backoffMs(3, () => 1)).to.equal(9600);
    for (let attempt = 1; attempt <= 40; attempt++) expect(backoffMs(attempt)).to.be.at.most(MAX_BACKOFF_MS);
    expect(backoffMs(12, () => 0)).to.equal(MAX_BACKOFF_MS);
  });
});

describe('delivery: body, headers and signature', () => {
  it('the body carries the normalised consumer fields, the tracking fields and the price, nothing internal', () => {
    const body = deliveryBody(received, received.lead as NormalisedLead, sale);
    expect(body).to.deep.equal({
      lead_id: 7, sid: 'src-1', s1: 'click-1', price: 31.25, currency: 'USD',
      lead: {
        first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com', mobile: '+12135550143', mobile_national: '2135550143',
        zip: '90210', zip4: null, accident_state: 'CA', certificate_url: 'https://cert.trustedform.com/abc',
      },
    });
  });

  it('signed with HMAC-SHA256 of "<timestamp>.<body>" when there is a secret', () => {
    const body = '{"lead_id":7}';
    const headers = deliveryHeaders(7, body, T0, 's3cret');
    const timestamp = String(T0.getTime() / 1000);
    const hex = createHmac('sha256', 's3cret').update(`${timestamp}.${body}`).digest('hex');
    expect(headers).to.deep.equal({
      'Content-Type': 'application/json', 'Idempotency-Key': 'lead-7', 'X-Leadpost-Timestamp': timestamp, 'X-Leadpost-Signature': `sha256=${hex}`,
    });
    expect(verifyDelivery('s3cret', timestamp, body, headers['X-Leadpost-Signature']!)).to.equal(true);
    expect(verifyDelivery('s3cret', timestamp, `${body} `, headers['X-Leadpost-Signature']!)).to.equal(false);
    expect(verifyDelivery('other', timestamp, body, signDelivery('s3cret', timestamp, body))).to.equal(false);
  });

  it('unsigned without a secret', () => {
    expect(deliveryHeaders(7, '{}', T0, null)).to.not.have.property('X-Leadpost-Signature');
  });
});
