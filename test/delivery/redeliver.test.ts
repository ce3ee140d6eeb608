import { createHmac } from 'node:crypto';
import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { LeadDelivered, LeadRedeliveryRequested } from '../../src/events/lead-events.js';
import { leadStream } from '../../src/events/lead-events.js';
import { runChild } from '../support/child.js';
import { type Reply, TestService, validLead } from '../support/service.js';
import { BuyerEndpoint, type ReceivedDelivery } from './buyer-endpoint.js';
import { DeliveryHarness, HOOK_BUYER, SECRET_ENV, deliveryRouting, until } from './harness.js';

// A webhook delivery that failed for good, sent again once the buyer fixed its side: through the
// admin route and the CLI, against the service as `leadpost serve` runs it (its own worker, on the
// background thread) and a real local HTTPS buyer that refuses with 401 until it is "fixed".

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));
const SECRET = 'whsec-rotated-5b7e21';

type Json = Record<string, any>;

describe('delivery: sending a delivery that failed for good again', function () {
  this.timeout(60_000);
  /** Leads the buyer takes (200), with those posted with s1 `welcome`; it refuses every other lead with a final 401, as while its secret was being rotated. */
  const fixed = new Set<number>();
  let endpoint: BuyerEndpoint;
  let svc: TestService;
  const keys: Record<string, string> = {};

  before(async function () {
    process.env[SECRET_ENV] = SECRET;
    endpoint = await BuyerEndpoint.start((r) => (fixed.has(r.body.lead_id as number) || r.body.s1 === 'welcome' ? 200 : 401), { keepIdleConnections: true });
    svc = await TestService.start({ routing: deliveryRouting(endpoint.url, { secret_env: SECRET_ENV }), buyerCa: endpoint.cert });
    keys.supplier = await svc.key('supplier', 'sup-1');
    keys.admin = await svc.key('admin', 'ops');
    keys.analyst = await svc.key('analyst', 'ann');
    keys.buyer = await svc.key('buyer', HOOK_BUYER);
  });
  after(async function () {
    await svc?.stop();
    await endpoint?.stop();
    delete process.env[SECRET_ENV];
  });

  const as = (key: string) => ({ 'x-api-key': key });
  const redeliver = (leadId: number, key = keys.admin!, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> =>
    body === undefined
      ? svc.request('POST', `/functions/deliveries/${leadId}/redeliver`, { ...as(key), ...headers })
      : svc.request('POST', `/functions/deliveries/${leadId}/redeliver`, { 'content-type': 'application/json', ...as(key), ...headers }, typeof body === 'string' ? body : JSON.stringify(body));
  const events = (leadId: number) => svc.service.store.readStream(leadStream(leadId));
  const ofType = async <T>(leadId: number, type: string) => (await events(leadId)).filter((e) => e.type === type).map((e) => e.data as T);

  async function sell(zip = '90210', s1 = 'click-1'): Promise<number> {
    const lead = validLead({ zip, s1 });
    const reply = await svc.post(lead, as(keys.supplier!));
    expect(reply.body, reply.text).to.include({ code: 'SOLD' });
    return reply.body.lead_id as number;
  }

  /** The lead's row as the deliveries list gives it, once it has `status`. */
  async function rowWith(leadId: number, status: string): Promise<Json> {
    let row: Json | undefined;
    await until(
      async () => {
        const page = await svc.request('GET', `/functions/deliveries?buyer=${HOOK_BUYER}&limit=500`, as(keys.admin!));
        row = (page.body.items as Json[]).find((r) => r.lead_id === leadId);
        return row?.status === status;
      },
      20_000,
      () => `lead ${leadId} ${status}: ${JSON.stringify(row)}`,
    );
    return row!;
  }

  /** A lead whose delivery the buyer refused with a final 401. */
  async function failedForGood(): Promise<number> {
    const leadId = await sell();
    const row = await rowWith(leadId, 'failed');
    expect(row).to.include({ attempts: 1, last_status_code: 401, last_error: 'http_4xx', next_attempt_at: null });
    return leadId;
  }

  const signed = (request: ReceivedDelivery) => {
    const timestamp = request.headers['x-leadpost-timestamp'] as string;
    return request.headers['x-leadpost-signature'] === `sha256=${createHmac('sha256', SECRET).update(`${timestamp}.${request.text}`).digest('hex')}`;
  };

  it('the admin route re-opens it; the buyer, fixed, receives the lead once more, signed, with the same Idempotency-Key, and the row reads delivered', async function () {
    const leadId = await failedForGood();
    expect(endpoint.forLead(leadId)).to.have.length(1);
    fixed.add(leadId);

    const reply = await redeliver(leadId, keys.admin!, { reason: 'secret_rotated' });
    expect(reply.status, reply.text).to.equal(202);
    expect(reply.body).to.include({ ok: true, code: 'OK' });
    // The row as it now stands, read from the lead's stream: pending, due now, the last failure still shown.
    const delivery = reply.body.delivery as Json;
    expect(delivery).to.include({ lead_id: leadId, buyer: HOOK_BUYER, delivery_kind: 'webhook', status: 'pending', attempts: 1, last_status_code: 401, last_error: 'http_4xx' });
    expect(Math.abs(Date.parse(delivery.next_attempt_at) - Date.now())).to.be.below(10_000);
    expect(delivery.lead).to.include({ first_name: 'Ada' });

    // Sent again at once (well within the minute the worker holds a lead it settled), and delivered.
    const row = await rowWith(leadId, 'delivered');
    expect(row).to.include({ attempts: 2, last_status_code: 200, last_error: null, next_attempt_at: null });
    const [first, again, ...more] = endpoint.forLead(leadId);
    expect(more, 'exactly once more').to.have.length(0);
    expect(again!.headers['idempotency-key']).to.equal(`lead-${leadId}`);
    expect(again!.headers['idempotency-key']).to.equal(first!.headers['idempotency-key']);
    expect(signed(again!), 'a valid signature').to.equal(true);
    expect(again!.body).to.deep.equal(first!.body);

    const [requested, ...twice] = await ofType<LeadRedeliveryRequested['data']>(leadId, 'LeadRedeliveryRequested');
    expect(twice).to.have.length(0);
    expect(requested).to.deep.include({ lead_id: leadId, buyer: HOOK_BUYER, round: 2, attempts: 1, requested_by: { role: 'admin', name: 'ops' }, reason: 'secret_rotated' });
    expect((await ofType<LeadDelivered['data']>(leadId, 'LeadDelivered')).map((d) => d.attempt)).to.deep.equal([2]);
    const recorded = (await events(leadId)).find((e) => e.type === 'LeadRedeliveryRequested')!;
    expect(recorded.metadata).to.include({ trace_id: reply.body.trace_id, causation_id: `request:${reply.body.trace_id as string}` });

    // The lead's view says delivered; a buyer reading its events sees that an admin asked, not which one.
    const lead = await svc.request('GET', `/functions/leads/${leadId}`, as(keys.buyer!));
    expect((lead.body.lead as Json).delivery).to.deep.equal({ status: 'delivered', attempts: 2 });
    const asBuyer = (await svc.request('GET', `/functions/leads/${leadId}/events`, as(keys.buyer!))).body.items as Json[];
    expect(asBuyer.find((e) => e.type === 'LeadRedeliveryRequested')!.data.requested_by).to.deep.equal({ role: 'admin' });
    const asAnalyst = (await svc.request('GET', `/functions/leads/${leadId}/events`, as(keys.analyst!))).body.items as Json[];
    expect(asAnalyst.find((e) => e.type === 'LeadRedeliveryRequested')!.data.requested_by).to.deep.equal({ role: 'admin', name: 'ops' });

    const metrics = (await svc.request('GET', '/metrics')).text;
    expect(metrics).to.match(/^leadpost_redeliveries_total\{code="OK"\} 1$/m);
  });

  it('refused: 403 for every key but an admin\'s, 404 for no such lead or a test lead, 409 for a delivery pending or delivered or erased, 422 naming each bad member', async function () {
    const leadId = await failedForGood();
    for (const key of [keys.analyst!, keys.supplier!, keys.buyer!]) {
      const reply = await redeliver(leadId, key);
      expect([reply.status, reply.body.code], reply.text).to.deep.equal([403, 'FORBIDDEN']);
    }
    expect((await redeliver(999_999)).body.code).to.equal('NOT_FOUND');
    expect((await redeliver(999_999)).status).to.equal(404);
    const test = await svc.post(validLead({ test: true }), as(keys.supplier!));
    expect((await redeliver(test.body.lead_id as number)).status).to.equal(404);

    const bad = await redeliver(leadId, keys.admin!, { reason: 'The buyer called Ada', channel: 'phone' });
    expect(bad.status, bad.text).to.equal(422);
    expect((bad.body.errors as Json[]).map((e) => e.field).sort()).to.deep.equal(['channel', 'reason']);
    expect(bad.text).to.not.contain('Ada');
    expect((await redeliver(leadId, keys.admin!, 'reason=x', { 'content-type': 'text/plain' })).body.code).to.equal('UNSUPPORTED_MEDIA_TYPE');
    expect((await redeliver(leadId, keys.admin!, '{"reason":')).body.code).to.equal('MALFORMED_JSON');
    expect(await ofType(leadId, 'LeadRedeliveryRequested'), 'nothing recorded by a refusal').to.deep.equal([]);

    // A pull buyer's lead waits for its acknowledgement: it never fails, so it is not sent again.
    const pulled = await sell('10001');
    const pending = await redeliver(pulled);
    expect([pending.status, pending.body.code]).to.deep.equal([409, 'NOT_FAILED']);
    // Delivered already.
    const deliveredId = await sell('90210', 'welcome');
    await until(async () => (await ofType(deliveredId, 'LeadDelivered')).length === 1);
    const done = await redeliver(deliveredId);
    expect([done.status, done.body.code]).to.deep.equal([409, 'NOT_FAILED']);

    // Erased, and its buyer (a pull buyer) is sent no lead.erased notice: there is nothing left to send.
    const email = ((await svc.request('GET', `/functions/leads/${pulled}`, as(keys.admin!))).body.lead as Json).lead.email as string;
    const erased = await svc.post({ email }, as(keys.admin!), '/functions/erasures');
    expect(erased.status, erased.text).to.equal(201);
    const cancelled = await redeliver(pulled);
    expect([cancelled.status, cancelled.body.code]).to.deep.equal([409, 'DELIVERY_CANCELLED']);
    expect(cancelled.body.message).to.contain('nothing left to send').and.contain('no `lead.erased` notice');
    const types = (await events(pulled)).map((e) => e.type);
    expect(types).to.not.include('LeadRedeliveryRequested');
    expect(types).to.not.include('ErasureNoticeRedeliveryRequested');
  });

  it('two requests at once re-open one round: one 202, one 409 NOT_FAILED, one event', async function () {
    const leadId = await failedForGood();
    const replies = await Promise.all([redeliver(leadId), redeliver(leadId)]);
    expect(replies.map((r) => r.status).sort()).to.deep.equal([202, 409]);
    expect(replies.find((r) => r.status === 409)!.body.code).to.equal('NOT_FAILED');
    expect(await ofType(leadId, 'LeadRedeliveryRequested')).to.have.length(1);
    // Still refused by the buyer: the new round's one 401 is final again.
    await until(async () => (await ofType(leadId, 'LeadDeliveryFailed')).length === 2);
    expect(endpoint.forLead(leadId)).to.have.length(2);
  });

  it('the CLI sends one lead again, or every lead of a buyer failed since a moment (a dry run first), and its lead.erased notices that failed for good', async function () {
    const since = new Date().toISOString();
    const [one, two, three] = [await failedForGood(), await failedForGood(), await failedForGood()];
    for (const id of [one, two, three]) fixed.add(id);
    // The routing file the service reads: the command checks the lead's buyer is still in it.
    const env = { LEADPOST_DATA_DIR: svc.dataDir, LEADPOST_ROUTING_FILE: join(svc.dataDir, 'routing.json') };

    const single = await runChild(['deliveries', 'redeliver', String(one), '--reason', 'secret_rotated'], env, { script: BIN });
    expect(single.code, single.stderr).to.equal(0);
    expect(single.lines[0]).to.match(new RegExp(`^redelivered lead ${one} to ${HOOK_BUYER}: round 2, pending, due now`));
    await rowWith(one, 'delivered');
    expect(endpoint.forLead(one)).to.have.length(2);
    const [requested] = await ofType<LeadRedeliveryRequested['data']>(one, 'LeadRedeliveryRequested');
    expect(requested).to.deep.include({ requested_by: { role: 'cli', name: 'cli' }, reason: 'secret_rotated' });

    const again = await runChild(['deliveries', 'redeliver', String(one)], env, { script: BIN });
    expect(again.code).to.equal(1);
    expect(again.stderr).to.contain(`lead ${one} not redelivered (NOT_FAILED)`);

    // Leads failed for good and erased since: their buyer is sent a lead.erased notice, which it
    // takes for one (its notice sent: refused as the run would) and refuses for good (401) for the
    // other, whose notice the run sends again.
    const erase = async (leadId: number) => {
      const view = await svc.request('GET', `/functions/leads/${leadId}`, as(keys.admin!));
      const erasure = await svc.post({ email: (view.body.lead as Json).lead.email }, as(keys.admin!), '/functions/erasures');
      expect(erasure.status, erasure.text).to.equal(201);
    };
    const noticeTaken = await failedForGood();
    fixed.add(noticeTaken);
    await erase(noticeTaken);
    const noticeRefused = await failedForGood();
    await erase(noticeRefused);
    await until(async () => (await ofType(noticeTaken, 'ErasureNoticeSent')).length === 1, 20_000, () => 'the notice taken');
    await until(async () => (await ofType(noticeRefused, 'ErasureNoticeFailed')).length === 1, 20_000, () => 'the notice refused');
    await svc.service.projections.waitFor(await svc.service.store.headPosition());

    const dry = await runChild(['deliveries', 'redeliver', '--buyer', HOOK_BUYER, '--failed-since', since, '--dry-run', '--json'], env, { script: BIN });
    expect(dry.code, dry.stderr).to.equal(0);
    const planned = JSON.parse(dry.lines[0]!) as { redelivered: number[]; notices: number[]; refused: Json[]; dry_run: boolean };
    expect(planned.dry_run).to.equal(true);
    expect(planned.redelivered.sort()).to.deep.equal([two, three].sort());
    expect(planned.notices).to.deep.equal([noticeRefused]);
    expect(planned.refused, 'refused as the run would').to.deep.equal([{ lead_id: noticeTaken, code: 'NOT_FAILED', subject: 'notice' }]);
    expect(await ofType(two, 'LeadRedeliveryRequested'), 'a dry run records nothing').to.deep.equal([]);
    // The same time without its offset, on a machine in another zone: UTC, as the API reads it.
    const elsewhere = await runChild(['deliveries', 'redeliver', '--buyer', HOOK_BUYER, '--failed-since', since.slice(0, -1), '--dry-run', '--json'], { ...env, TZ: 'America/Los_Angeles' }, { script: BIN });
    expect(elsewhere.code, elsewhere.stderr).to.equal(0);
    expect((JSON.parse(elsewhere.lines[0]!) as { redelivered: number[] }).redelivered.sort()).to.deep.equal([two, three].sort());
    expect(await ofType(noticeRefused, 'ErasureNoticeRedeliveryRequested'), 'a dry run records nothing').to.deep.equal([]);

    fixed.add(noticeRefused);
    const swept = await runChild(['deliveries', 'redeliver', '--buyer', HOOK_BUYER, '--failed-since', since], env, { script: BIN });
    expect(swept.code, swept.stderr).to.equal(0);
    expect(swept.lines[0]).to.match(new RegExp(`^2 lead\\(s\\) redelivered to ${HOOK_BUYER}: `));
    expect(swept.lines[1]).to.equal(`1 lead.erased notice(s) sent again to ${HOOK_BUYER}: ${noticeRefused}`);
    expect(swept.lines[2]).to.equal(`lead ${noticeTaken} not redelivered (NOT_FAILED): its personal data is gone, and its lead.erased notice has not failed for good (sent, or still being sent)`);
    for (const id of [two, three]) {
      await rowWith(id, 'delivered');
      expect(endpoint.forLead(id), `lead ${id}`).to.have.length(2);
    }
    await until(async () => (await ofType(noticeRefused, 'ErasureNoticeSent')).length === 1, 20_000, () => 'the notice sent again');
    expect((await ofType<Json>(noticeRefused, 'ErasureNoticeRedeliveryRequested'))[0]).to.deep.include({ round: 2, attempts: 1, requested_by: { role: 'cli', name: 'cli' } });

    // One lead's notice, by its id: sent again as its delivery would be.
    const oneNotice = await failedForGood();
    await erase(oneNotice);
    await until(async () => (await ofType(oneNotice, 'ErasureNoticeFailed')).length === 1, 20_000, () => 'the notice refused');
    fixed.add(oneNotice);
    const noticeAgain = await runChild(['deliveries', 'redeliver', String(oneNotice), '--reason', 'buyer_outage'], env, { script: BIN });
    expect(noticeAgain.code, noticeAgain.stderr).to.equal(0);
    expect(noticeAgain.lines[0]).to.match(new RegExp(`^sending the lead.erased notice of lead ${oneNotice} to ${HOOK_BUYER} again: round 2, pending, due now`));
    await until(async () => (await ofType(oneNotice, 'ErasureNoticeSent')).length === 1, 20_000, () => 'the notice sent again');

    // A routing file without the lead's buyer: re-opened, the lead would wait for ever, so it is refused.
    const withoutBuyer = join(svc.dataDir, 'routing-without-buyer.json');
    writeFileSync(withoutBuyer, JSON.stringify({ buyers: [{ id: 'someone-else', price: 1 }], buckets: [{ id: 'unsold', default: true }] }));
    const four = await failedForGood();
    const unknown = await runChild(['deliveries', 'redeliver', String(four)], { ...env, LEADPOST_ROUTING_FILE: withoutBuyer }, { script: BIN });
    expect(unknown.code, unknown.stderr).to.equal(1);
    expect(unknown.stderr).to.contain(`lead ${four} not redelivered (BUYER_UNKNOWN): its buyer is not in the routing file in force`);
    expect(await ofType(four, 'LeadRedeliveryRequested')).to.deep.equal([]);

    // A buyer id the routing file does not have (another case, a typo, one taken out of the file):
    // it would match no lead and answer "0 lead(s)", exit 0, while the buyer's failed leads stay
    // failed. Refused, naming the ids the file has; the value only when it reads as an id.
    const sweeps: Array<[string, Record<string, string>, string]> = [
      [HOOK_BUYER.toUpperCase(), env, `--buyer '${HOOK_BUYER.toUpperCase()}' is not a buyer of the routing file ${env.LEADPOST_ROUTING_FILE} (the buyers are ${HOOK_BUYER}, pull-buyer)`],
      [HOOK_BUYER, { ...env, LEADPOST_ROUTING_FILE: withoutBuyer }, `--buyer '${HOOK_BUYER}' is not a buyer of the routing file ${withoutBuyer} (the buyers are someone-else)`],
      ['ada.lovelace@example.com', env, `--buyer is not a buyer of the routing file ${env.LEADPOST_ROUTING_FILE} (the buyers are ${HOOK_BUYER}, pull-buyer)`],
    ];
    for (const [buyer, routing, said] of sweeps) {
      for (const dryRun of [['--dry-run'], []]) {
        const typo = await runChild(['deliveries', 'redeliver', '--buyer', buyer, '--failed-since', since, ...dryRun], routing, { script: BIN });
        expect(typo.code, `${buyer} ${dryRun.join('')}: ${typo.lines.join('\n')}`).to.equal(1);
        expect(typo.stderr.trim()).to.equal(`leadpost deliveries redeliver: ${said}: nothing was sent; a buyer taken out of the file must be put back in it first`);
        expect(typo.lines).to.deep.equal([]);
      }
    }
    expect(await ofType(four, 'LeadRedeliveryRequested')).to.deep.equal([]);

    const usage = await runChild(['deliveries', 'redeliver', String(one), '--buyer', HOOK_BUYER], env, { script: BIN });
    expect(usage.code).to.equal(2);
    expect(usage.stderr.split('\n')[0]).to.equal('leadpost deliveries redeliver: give either LEAD_ID or --buyer with --failed-since, not both');
  });
});

describe('delivery: a re-opened delivery erased before it is sent', function () {
  this.timeout(60_000);

  it('is cancelled like any pending delivery, and never sent; sent again, only its failed lead.erased notice is', async function () {
    const endpoint = await BuyerEndpoint.start(() => 401);
    const harness = await DeliveryHarness.start(endpoint);
    try {
      harness.worker();
      const { leadId, lead } = await harness.sell();
      await harness.rowWith(leadId, 'failed');
      // No worker runs now: the re-opened delivery stays pending until the erasure.
      await harness.stopWorkers();
      const admin = await harness.svc.key('admin', 'ops');
      const reopened = await harness.svc.request('POST', `/functions/deliveries/${leadId}/redeliver`, { 'x-api-key': admin });
      expect(reopened.status, reopened.text).to.equal(202);
      const erased = await harness.svc.post({ email: lead.email }, { 'x-api-key': admin }, '/functions/erasures');
      expect(erased.status, erased.text).to.equal(201);
      const [cancelled, ...more] = await harness.ofType<{ reason: string; attempts: number }>(leadId, 'LeadDeliveryCancelled');
      expect(more).to.have.length(0);
      expect(cancelled).to.include({ reason: 'erased', attempts: 1 });
      await harness.rowWith(leadId, 'cancelled');
      harness.worker();
      // Its buyer had the lead sent to it once: it is told to delete it, and refuses that too (401, final).
      await until(async () => (await harness.row(leadId))?.notice === 'failed', 10_000, () => 'the notice given up');
      // Sent again now, it is that notice that is re-opened, never the cancelled delivery.
      const again = await harness.svc.request('POST', `/functions/deliveries/${leadId}/redeliver`, { 'x-api-key': admin });
      expect(again.status, again.text).to.equal(202);
      expect(again.body.delivery).to.include({ status: 'cancelled', notice: 'pending' });
      await until(async () => (await harness.ofType(leadId, 'ErasureNoticeFailed')).length === 2, 10_000, () => 'the notice sent again');
      expect(endpoint.forLead(leadId).filter((r) => r.body.type !== 'lead.erased'), 'the lead itself').to.have.length(1);
      expect(await harness.ofType(leadId, 'LeadDeliveryAttempted')).to.have.length(1);
    } finally {
      await harness.stop();
      await endpoint.stop();
    }
  });
});

describe('delivery: a lead its buyer returns before it is delivered', function () {
  this.timeout(60_000);

  it('is cancelled at the return, and the retry that was due is never sent, even once the buyer answers again', async function () {
    let answer = 503;
    const endpoint = await BuyerEndpoint.start(() => answer);
    const harness = await DeliveryHarness.start(endpoint, { max_attempts: 4 });
    try {
      // The retry comes a minute after the first failure: the return lands while it is due.
      harness.worker({ backoff: () => 60_000 });
      const { leadId } = await harness.sell();
      await until(async () => (await harness.ofType(leadId, 'LeadDeliveryFailed')).length === 1);
      expect(endpoint.forLead(leadId)).to.have.length(1);
      const buyer = await harness.svc.key('buyer', HOOK_BUYER);
      const returned = await harness.svc.post({ type: 'return', reason: 'bad_phone' }, { 'x-api-key': buyer }, `/functions/leads/${leadId}/feedback`);
      expect(returned.status, returned.text).to.equal(201);
      const [cancelled, ...more] = await harness.ofType<{ reason: string; attempts: number }>(leadId, 'LeadDeliveryCancelled');
      expect(more).to.have.length(0);
      expect(cancelled).to.include({ reason: 'returned', attempts: 1 });
      await harness.rowWith(leadId, 'cancelled');
      // The buyer is back, and a new worker finds every due retry at once.
      answer = 200;
      await harness.stopWorkers();
      harness.worker({ backoff: () => 100 });
      await harness.laterLeadSettled();
      expect(endpoint.forLead(leadId), 'the returned lead was sent again').to.have.length(1);
      expect(await harness.ofType(leadId, 'LeadDeliveryAttempted')).to.have.length(1);
      const admin = await harness.svc.key('admin', 'ops');
      const refused = await harness.svc.request('POST', `/functions/deliveries/${leadId}/redeliver`, { 'x-api-key': admin });
      expect([refused.status, refused.body.code]).to.deep.equal([409, 'ALREADY_RETURNED']);
    } finally {
      await harness.stop();
      await endpoint.stop();
    }
  });
});
