import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { parseKey } from '../../src/keys/api-keys.js';
import { TestService, validLead } from '../support/service.js';

// Pull delivery with ack, buckets, and every feedback rule, through the real service; the
// reversal of returned revenue read back from the report.

const routing = {
  buyers: [
    { id: 'puller', price: 30, states: ['CA'], delivery: { kind: 'pull' }, return_window_days: 3, return_reasons: ['bad_phone', 'fraud'] },
    { id: 'other', price: 20, states: ['NY'] },
    // Nothing listens there: its one attempt fails, and the lead stays the worker's to deliver.
    { id: 'hooked', price: 25, states: ['NV'], delivery: { kind: 'webhook', url: 'https://127.0.0.1:1/leads', max_attempts: 1 } },
  ],
  buckets: [{ id: 'unsold', default: true }, { id: 'unsold-tx', states: ['TX'] }],
};

describe('after the sale: pull, ack, buckets, feedback', function () {
  let svc: TestService;
  let clock = new Date('2026-11-20T15:00:00Z');
  const keys: Record<string, string> = {};

  before(async function () {
    svc = await TestService.start({ routing, now: () => clock });
    keys.supplier = await svc.key('supplier', 'sup-a');
    keys.puller = await svc.key('buyer', 'puller');
    keys.other = await svc.key('buyer', 'other');
    keys.analyst = await svc.key('analyst', 'ann');
    keys.admin = await svc.key('admin', 'root');
    keys.hooked = await svc.key('buyer', 'hooked');
  });
  after(async () => svc.stop());

  const sell = async (overrides: Record<string, unknown> = {}) => {
    const reply = await svc.post(validLead(overrides), { 'x-api-key': keys.supplier! });
    expect(reply.status, reply.text).to.equal(201);
    return reply.body.lead_id as number;
  };
  const settled = async () => svc.service.projections.waitFor(await svc.service.store.headPosition());
  const feedback = (leadId: number, key: string, body: unknown) => svc.post(body, { 'x-api-key': key }, `/functions/leads/${leadId}/feedback`);
  const ack = (leadId: number, key: string) => svc.request('POST', `/functions/deliveries/${leadId}/ack`, { 'x-api-key': key });
  const get = (path: string, key: string) => svc.request('GET', path, { 'x-api-key': key });

  describe('pull delivery', function () {
    it("a webhook buyer's lead is not acknowledged: 409 NOT_PULLED, nothing recorded (an ack would stop its retries)", async function () {
      const leadId = await sell({ accident_state: 'NV', zip: '89101' });
      for (const key of [keys.hooked!, keys.admin!]) {
        const reply = await ack(leadId, key);
        expect([reply.status, reply.body.code]).to.deep.equal([409, 'NOT_PULLED']);
      }
      const events = await svc.service.store.readStream(`lead-${leadId}`);
      expect(events.filter((e) => e.type === 'LeadDelivered')).to.have.length(0);
    });

    it('a pull buyer lists its pending leads with their consumer fields, acks one, and it is delivered', async function () {
      const leadId = await sell();
      await settled();
      const pending = await get('/functions/deliveries?status=pending', keys.puller!);
      const row = (pending.body.items as Array<Record<string, unknown>>).find((i) => i.lead_id === leadId)!;
      expect(row).to.include({ buyer: 'puller', status: 'pending', attempts: 0 });
      expect((row.lead as { email: string }).email).to.match(/@example\.com$/);

      const first = await ack(leadId, keys.puller!);
      expect(first.status).to.equal(200);
      expect(first.body.delivery).to.include({ lead_id: leadId, status: 'delivered' });
      // Idempotent: a second ack answers the same and records nothing new.
      const second = await ack(leadId, keys.puller!);
      expect(second.body.delivery).to.deep.equal(first.body.delivery);
      const events = await svc.service.store.readStream(`lead-${leadId}`);
      expect(events.filter((e) => e.type === 'LeadDelivered')).to.have.length(1);

      await settled();
      const after = await get('/functions/deliveries?status=pending', keys.puller!);
      expect((after.body.items as Array<{ lead_id: number }>).map((i) => i.lead_id)).to.not.include(leadId);
      const delivered = await get('/functions/deliveries?status=delivered', keys.puller!);
      expect((delivered.body.items as Array<Record<string, unknown>>).find((i) => i.lead_id === leadId)).to.include({ status: 'delivered' });
      const view = await get(`/functions/leads/${leadId}`, keys.puller!);
      expect((view.body.lead as { delivery: unknown }).delivery).to.deep.equal({ status: 'delivered', attempts: 1 });
    });

    it('an ack takes no fields: {} is an ack, a field 422, a body not JSON 400 or 415, one over the limit (64 KiB by default) 413; none records anything', async function () {
      const leadId = await sell();
      const send = (payload: string | Buffer, type = 'application/json') =>
        svc.request('POST', `/functions/deliveries/${leadId}/ack`, { 'x-api-key': keys.puller!, 'content-type': type }, payload);
      const field = await send('{"status":"rejected","note":"x"}');
      expect([field.status, field.body.code]).to.deep.equal([422, 'INVALID']);
      expect((field.body.errors as Array<{ field: string; code: string }>).map((e) => [e.field, e.code])).to.deep.equal([
        ['status', 'unknown_field'],
        ['note', 'unknown_field'],
      ]);
      expect((await send('{"status":')).body.code).to.equal('MALFORMED_JSON');
      expect((await send('[]')).body.code).to.equal('MALFORMED_JSON');
      expect((await send('status=ok', 'text/plain')).status).to.equal(415);
      const huge = await send(Buffer.alloc(65_537, 0x20));
      expect([huge.status, huge.body.code]).to.deep.equal([413, 'PAYLOAD_TOO_LARGE']);
      expect((await svc.service.store.readStream(`lead-${leadId}`)).map((e) => e.type)).to.not.include('LeadDelivered');
      const empty = await send('{}');
      expect(empty.status).to.equal(200);
      expect(empty.body.delivery).to.include({ lead_id: leadId, status: 'delivered' });
    });

    it('concurrent acks record one delivery', async function () {
      const leadId = await sell();
      const replies = await Promise.all(Array.from({ length: 10 }, () => ack(leadId, keys.puller!)));
      expect(replies.every((r) => r.status === 200)).to.equal(true);
      const events = await svc.service.store.readStream(`lead-${leadId}`);
      expect(events.filter((e) => e.type === 'LeadDelivered')).to.have.length(1);
    });

    it('another buyer, a supplier, a test lead or an unknown lead: 404 or 403, nothing recorded', async function () {
      const leadId = await sell();
      expect((await ack(leadId, keys.other!)).status).to.equal(404);
      expect((await ack(leadId, keys.supplier!)).status).to.equal(403);
      expect((await ack(999_999, keys.puller!)).status).to.equal(404);
      const testLead = await sell({ test: true });
      expect((await ack(testLead, keys.puller!)).status).to.equal(404);
      const events = await svc.service.store.readStream(`lead-${leadId}`);
      expect(events.map((e) => e.type)).to.not.include('LeadDelivered');
    });

    it('a delivery cancelled by an erasure cannot be acknowledged: 409 DELIVERY_CANCELLED, nothing recorded, still cancelled', async function () {
      const lead = validLead();
      const leadId = await sell(lead);
      const erased = await svc.post({ email: lead.email }, { 'x-api-key': keys.admin! }, '/functions/erasures');
      expect(erased.status, erased.text).to.equal(201);
      const before = await svc.service.store.readStream(`lead-${leadId}`);
      expect(before.map((e) => e.type)).to.include('LeadDeliveryCancelled');

      for (const key of [keys.puller!, keys.admin!]) {
        const reply = await ack(leadId, key);
        expect([reply.status, reply.body.code, reply.body.ok]).to.deep.equal([409, 'DELIVERY_CANCELLED', false]);
        expect(reply.body.delivery).to.equal(undefined);
      }
      const events = await svc.service.store.readStream(`lead-${leadId}`);
      expect(events).to.have.length(before.length);
      await settled();
      const view = await get(`/functions/leads/${leadId}`, keys.puller!);
      expect((view.body.lead as { delivery: unknown }).delivery).to.deep.include({ status: 'cancelled' });
    });
  });

  describe('a pulled lead returned under a release that did not cancel its delivery with the return', function () {
    it('its acknowledgement cancels the delivery (409 DELIVERY_CANCELLED), so it leaves the pending list; once, however often acknowledged', async function () {
      const leadId = await sell();
      // What such a release recorded for a return: the feedback and LeadReturned, the delivery left pending.
      const returnedAt = clock.toISOString();
      await svc.service.store.append(`lead-${leadId}`, [
        { type: 'FeedbackRecorded', data: { lead_id: leadId, buyer: 'puller', type: 'return', reason: 'bad_phone', recorded_at: returnedAt } },
        { type: 'LeadReturned', data: { lead_id: leadId, buyer: 'puller', revenue: 30, currency: 'USD', reason: 'bad_phone', returned_at: returnedAt } },
      ]);
      await settled();
      const pending = async () => ((await get('/functions/deliveries?status=pending', keys.puller!)).body.items as Array<{ lead_id: number }>).map((row) => row.lead_id);
      expect(await pending()).to.include(leadId);
      for (let i = 0; i < 3; i++) {
        const reply = await ack(leadId, keys.puller!);
        expect([reply.status, reply.body.code]).to.deep.equal([409, 'DELIVERY_CANCELLED']);
      }
      const types = (await svc.service.store.readStream(`lead-${leadId}`)).map((event) => event.type);
      expect(types.filter((type) => type === 'LeadDeliveryCancelled')).to.have.length(1);
      expect(types).to.not.include('LeadDelivered');
      await settled();
      expect(await pending()).to.not.include(leadId);
      const view = await get(`/functions/leads/${leadId}`, keys.puller!);
      expect((view.body.lead as { delivery: unknown }).delivery).to.deep.include({ status: 'cancelled' });
    });
  });

  describe('buckets', function () {
    it('unsold leads are listed per bucket to analysts and admins', async function () {
      const unsold = await sell({ accident_state: 'TX', zip: '75001' });
      await settled();
      for (const key of [keys.analyst!, keys.admin!]) {
        const reply = await get('/functions/deliveries?bucket=unsold-tx', key);
        expect((reply.body.items as Array<{ lead_id: number; bucket: string }>).map((i) => [i.lead_id, i.bucket])).to.deep.include([unsold, 'unsold-tx']);
      }
      const buyerView = await get('/functions/deliveries?bucket=unsold-tx', keys.puller!);
      expect(buyerView.body.items).to.deep.equal([]);
    });
  });

  describe('feedback', function () {
    it('conversion and contacted are recorded and listed to the buyer and the supplier', async function () {
      const leadId = await sell();
      const conversion = await feedback(leadId, keys.puller!, { type: 'conversion' });
      expect(conversion.status).to.equal(201);
      expect(conversion.body.feedback).to.deep.include({ lead_id: leadId, buyer: 'puller', type: 'conversion', reason: null });
      expect((await feedback(leadId, keys.puller!, { type: 'contacted', reason: 'called_twice' })).status).to.equal(201);
      await settled();
      const forSupplier = await get('/functions/feedback?type=conversion', keys.supplier!);
      expect((forSupplier.body.items as Array<Record<string, unknown>>).find((f) => f.lead_id === leadId)).to.include({ type: 'conversion', buyer: 'puller' });
      const forBuyer = await get('/functions/feedback', keys.puller!);
      expect((forBuyer.body.items as Array<{ lead_id: number }>).filter((f) => f.lead_id === leadId)).to.have.length(2);
      expect((await get('/functions/feedback', keys.other!)).body.items).to.deep.equal([]);
      const view = await get(`/functions/leads/${leadId}`, keys.supplier!);
      expect((view.body.lead as { feedback: Array<{ type: string }> }).feedback.map((f) => f.type)).to.deep.equal(['conversion', 'contacted']);
    });

    it('the same conversion or contact sent again (an answer lost) records nothing: 200 with the one recorded first; another reason is new feedback', async function () {
      const leadId = await sell();
      const first = await feedback(leadId, keys.puller!, { type: 'conversion', reason: 'policy_bound' });
      expect([first.status, first.body.message]).to.deep.equal([201, 'Feedback recorded.']);
      const again = await feedback(leadId, keys.puller!, { type: 'conversion', reason: 'policy_bound' });
      expect([again.status, again.body.code, again.body.message]).to.deep.equal([200, 'OK', 'Feedback recorded already.']);
      expect(again.body.feedback).to.deep.equal(first.body.feedback);
      // The admin acting for the buyer sends the same news: answered from the same record.
      expect((await feedback(leadId, keys.admin!, { type: 'conversion', reason: 'policy_bound' })).status).to.equal(200);
      expect((await feedback(leadId, keys.puller!, { type: 'contacted' })).status).to.equal(201);
      expect((await feedback(leadId, keys.puller!, { type: 'contacted' })).status).to.equal(200);
      expect((await feedback(leadId, keys.puller!, { type: 'contacted', reason: 'second_call' })).status).to.equal(201);
      const recorded = (await svc.service.store.readStream(`lead-${leadId}`)).filter((e) => e.type === 'FeedbackRecorded');
      expect(recorded.map((e) => [(e.data as { type: string }).type, (e.data as { reason: string | null }).reason])).to.deep.equal([
        ['conversion', 'policy_bound'],
        ['contacted', null],
        ['contacted', 'second_call'],
      ]);
    });

    it('a return needs an allowed reason (422), within the window (409), once (409)', async function () {
      const leadId = await sell();
      const noReason = await feedback(leadId, keys.puller!, { type: 'return' });
      expect([noReason.status, noReason.body.code]).to.deep.equal([422, 'INVALID']);
      // Missing, it is `required`, as any missing field is, and the message says which reasons are taken.
      expect(noReason.body.errors).to.deep.equal([{ field: 'reason', code: 'required', message: 'reason is required for a return: one of bad_phone, fraud' }]);
      const badReason = await feedback(leadId, keys.puller!, { type: 'return', reason: 'changed_mind' });
      expect(badReason.status).to.equal(422);
      const ok = await feedback(leadId, keys.puller!, { type: 'return', reason: 'bad_phone' });
      expect(ok.status).to.equal(201);
      const again = await feedback(leadId, keys.puller!, { type: 'return', reason: 'fraud' });
      expect([again.status, again.body.code]).to.deep.equal([409, 'ALREADY_RETURNED']);

      const late = await sell();
      clock = new Date(clock.getTime() + 3 * 86_400_000 + 1000);
      try {
        const reply = await feedback(late, keys.puller!, { type: 'return', reason: 'fraud' });
        expect([reply.status, reply.body.code]).to.deep.equal([409, 'RETURN_WINDOW_CLOSED']);
        // Other feedback is still welcome after the window.
        expect((await feedback(late, keys.puller!, { type: 'contacted' })).status).to.equal(201);
      } finally {
        clock = new Date('2026-11-20T15:00:00Z');
      }
    });

    it('a return whose reason is not the buyer\'s names it beside every other failing field, in one answer', async function () {
      const leadId = await sell();
      const reply = await feedback(leadId, keys.puller!, { type: 'return', reason: 'changed_mind', note: 'x' });
      expect([reply.status, reply.body.code]).to.deep.equal([422, 'INVALID']);
      expect(reply.body.errors).to.have.deep.members([
        { field: 'note', code: 'unknown_field', message: 'note is not a feedback field' },
        { field: 'reason', code: 'invalid_value', message: 'reason must be one of: bad_phone, fraud' },
      ]);
      // A reason that breaks the body's own rules is named once, by that rule.
      const malformed = await feedback(leadId, keys.puller!, { type: 'return', reason: 'Changed Mind', note: 'x' });
      expect((malformed.body.errors as Array<{ field: string; code: string }>).map((e) => [e.field, e.code])).to.have.deep.members([['note', 'unknown_field'], ['reason', 'invalid_format']]);
      const events = await svc.service.store.readStream(`lead-${leadId}`);
      expect(events.filter((e) => e.type === 'FeedbackRecorded')).to.have.length(0);
    });

    it('10 concurrent returns of one lead: one succeeds, the rest are ALREADY_RETURNED', async function () {
      const leadId = await sell();
      const replies = await Promise.all(Array.from({ length: 10 }, () => feedback(leadId, keys.puller!, { type: 'return', reason: 'fraud' })));
      expect(replies.filter((r) => r.status === 201)).to.have.length(1);
      expect(replies.filter((r) => r.body.code === 'ALREADY_RETURNED')).to.have.length(9);
      const events = await svc.service.store.readStream(`lead-${leadId}`);
      expect(events.filter((e) => e.type === 'LeadReturned')).to.have.length(1);
    });

    it('suppliers and analysts may not post feedback (403); a buyer that did not buy the lead gets 404', async function () {
      const leadId = await sell();
      expect((await feedback(leadId, keys.supplier!, { type: 'conversion' })).status).to.equal(403);
      expect((await feedback(leadId, keys.analyst!, { type: 'conversion' })).status).to.equal(403);
      expect((await feedback(leadId, keys.other!, { type: 'conversion' })).status).to.equal(404);
      expect((await feedback(999_999, keys.puller!, { type: 'conversion' })).status).to.equal(404);
    });

    it('a bad feedback body is 422 naming the field, or 400/415 like any JSON route', async function () {
      const leadId = await sell();
      const unknownType = await feedback(leadId, keys.puller!, { type: 'praise', stars: 5 });
      expect(unknownType.status).to.equal(422);
      expect(unknownType.body.errors).to.have.deep.members([
        { field: 'type', code: 'invalid_value', message: 'type must be one of return, conversion, contacted' },
        { field: 'stars', code: 'unknown_field', message: 'stars is not a feedback field' },
      ]);
      // Each field once, with the rule it breaks: a type, or a length.
      for (const [body, error] of [
        [{ type: 5 }, { field: 'type', code: 'wrong_type', message: 'type must be a string' }],
        [{ type: null }, { field: 'type', code: 'wrong_type', message: 'type must be a string' }],
        [{ type: 'return', reason: 'r'.repeat(5000) }, { field: 'reason', code: 'too_long', message: 'reason must be at most 64 characters' }],
        [{ type: 'return', reason: '' }, { field: 'reason', code: 'too_short', message: 'reason must not be empty' }],
        [{}, { field: 'type', code: 'required', message: 'type is required' }],
        // Free text could carry a consumer's name or number to analysts: a reason is a code.
        [{ type: 'conversion', reason: 'called Ann at 2135550199' }, { field: 'reason', code: 'invalid_format', message: 'reason must be a snake_case code of lowercase letters, digits and underscores, starting with a letter' }],
      ] as const) {
        const reply = await feedback(leadId, keys.puller!, body);
        expect([reply.status, reply.body.errors], JSON.stringify(body).slice(0, 40)).to.deep.equal([422, [error]]);
      }
      expect((await feedback(leadId, keys.puller!, '[1]')).status).to.equal(400);
      const form = await svc.post('type=return', { 'x-api-key': keys.puller!, 'content-type': 'text/plain' }, `/functions/leads/${leadId}/feedback`);
      expect(form.status).to.equal(415);
    });

    it('a return reverses the revenue in the report: returned, revenue and net_revenue', async function () {
      const today = clock.toISOString().slice(0, 10);
      await settled();
      const before = await get(`/functions/reports/summary?from=${today}&to=${today}&group_by=buyer`, keys.analyst!);
      const row = (body: Record<string, unknown>) => (body.items as Array<Record<string, number | string>>).find((r) => r.buyer === 'puller')!;
      const was = row(before.body);
      const leadId = await sell();
      expect((await feedback(leadId, keys.puller!, { type: 'return', reason: 'fraud' })).status).to.equal(201);
      await settled();
      const now = row((await get(`/functions/reports/summary?from=${today}&to=${today}&group_by=buyer`, keys.analyst!)).body);
      expect(Number(now.sold) - Number(was.sold)).to.equal(1);
      expect(Number(now.returned) - Number(was.returned)).to.equal(1);
      expect(Number(now.revenue) - Number(was.revenue)).to.equal(30);
      // The sale and its return cancel out in net revenue.
      expect(Number(now.net_revenue)).to.equal(Number(was.net_revenue));
      expect(Number(now.net_revenue)).to.equal(Number(now.revenue) - 30 * Number(now.returned));
    });
  });

  describe('event metadata', function () {
    const traceparent = (traceId: string) => ({ traceparent: `00-${traceId}-00f067aa0ba902b7-01` });
    const keyId = (key: string) => parseKey(key)!.id;

    it('feedback, a return and a pull ack carry the full metadata: their own trace and principal, the post as correlation', async function () {
      const postTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
      const posted = await svc.post(validLead(), { 'x-api-key': keys.supplier!, ...traceparent(postTrace) });
      expect(posted.status, posted.text).to.equal(201);
      const leadId = posted.body.lead_id as number;

      const conversionTrace = 'a1000000000000000000000000000001';
      const returnTrace = 'a2000000000000000000000000000002';
      const ackTrace = 'a3000000000000000000000000000003';
      const conversion = await svc.post({ type: 'conversion' }, { 'x-api-key': keys.puller!, ...traceparent(conversionTrace) }, `/functions/leads/${leadId}/feedback`);
      expect(conversion.status, conversion.text).to.equal(201);
      // An admin may acknowledge for the buyer: the event names the admin, the data the buyer.
      const acked = await svc.request('POST', `/functions/deliveries/${leadId}/ack`, { 'x-api-key': keys.admin!, ...traceparent(ackTrace) });
      expect([acked.status, acked.body.trace_id]).to.deep.equal([200, ackTrace]);
      const returned = await svc.post({ type: 'return', reason: 'fraud' }, { 'x-api-key': keys.puller!, ...traceparent(returnTrace) }, `/functions/leads/${leadId}/feedback`);
      expect(returned.status, returned.text).to.equal(201);

      const events = await svc.service.store.readStream(`lead-${leadId}`);
      expect(events.map((e) => e.type)).to.deep.equal(['LeadReceived', 'LeadEnriched', 'LeadRouted', 'LeadSold', 'FeedbackRecorded', 'LeadDelivered', 'FeedbackRecorded', 'LeadReturned']);
      for (const event of events) {
        // LeadReceived is at version 2 (its personal fields encrypted), the other lead events at 1.
        expect(event.metadata, event.type).to.include({ schema: event.type === 'LeadReceived' ? 2 : 1, supplier_id: 'sup-a', correlation_id: postTrace });
        expect(Date.parse(event.metadata.occurred_at as string), event.type).to.be.a('number').and.not.NaN;
        expect(event.metadata.causation_id, event.type).to.equal(`request:${event.metadata.trace_id as string}`);
      }
      for (const event of events.slice(0, 4)) expect(event.metadata.trace_id, event.type).to.equal(postTrace);

      const puller = { role: 'buyer', id: 'puller', key_id: keyId(keys.puller!) };
      const after = events.slice(4).map((e) => [e.type, e.metadata.trace_id, e.metadata.principal, e.metadata.occurred_at]);
      expect(after).to.deep.equal([
        ['FeedbackRecorded', conversionTrace, puller, clock.toISOString()],
        ['LeadDelivered', ackTrace, { role: 'admin', id: 'root', key_id: keyId(keys.admin!) }, clock.toISOString()],
        ['FeedbackRecorded', returnTrace, puller, clock.toISOString()],
        ['LeadReturned', returnTrace, puller, clock.toISOString()],
      ]);
      expect(events[5]!.data).to.include({ buyer: 'puller', via: 'pull' });
    });
  });
});

describe('after the sale: a buyer taken out of the routing file', function () {
  let svc: TestService;
  const keys: Record<string, string> = {};
  before(async function () {
    svc = await TestService.start({ routing });
    keys.supplier = await svc.key('supplier', 'sup-a');
    keys.puller = await svc.key('buyer', 'puller');
  });
  after(async () => svc.stop());

  it('its returns are refused 409 BUYER_UNKNOWN saying why, not as a reason it does not take; other feedback is recorded', async function () {
    const sold = await svc.post(validLead(), { 'x-api-key': keys.supplier! });
    expect(sold.body.code, sold.text).to.equal('SOLD');
    const leadId = sold.body.lead_id as number;
    writeFileSync(join(svc.dataDir, 'routing.json'), JSON.stringify({ ...routing, buyers: routing.buyers.filter((buyer) => buyer.id !== 'puller') }));
    expect((await svc.service.reload()).routing).to.include({ changed: true });
    const feedback = (body: unknown) => svc.post(body, { 'x-api-key': keys.puller! }, `/functions/leads/${leadId}/feedback`);
    const returned = await feedback({ type: 'return', reason: 'bad_phone' });
    expect([returned.status, returned.body.code]).to.deep.equal([409, 'BUYER_UNKNOWN']);
    expect(returned.body.message).to.match(/not in the routing file in force/).and.match(/"active": false/);
    expect((await svc.service.store.readStream(`lead-${leadId}`)).map((e) => e.type)).to.not.include('LeadReturned');
    // A body that breaks the rules is named as such first.
    expect((await feedback({ type: 'return', reason: 'bad_phone', note: 1 })).body.code).to.equal('INVALID');
    expect((await feedback({ type: 'conversion' })).status).to.equal(201);
  });
});
