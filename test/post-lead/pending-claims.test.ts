import { expect } from 'chai';
import { CLAIM_IN_FLIGHT_MS } from '../../src/commands/contacts.js';
import { leadStream } from '../../src/events/lead-events.js';
import { contactStream } from '../../src/personal-data/contact-hashes.js';
import { type Reply, TestService, leadWith } from '../support/service.js';
import { until } from '../support/until.js';
import { envelopeProblems, uniqueContact } from './helpers.js';

// A post claims its consumer's mobile and e-mail before its lead is recorded. A process killed in
// between leaves the claims of a lead that never comes, and the supplier's retry (often the very
// same post, sent as soon as the service answers again) finds them. For their first seconds no
// one can tell such a claim from another process's post still under way: the retry is told to
// retry (409 DUPLICATE_PENDING, Retry-After), never that the consumer is a duplicate, and nothing
// is recorded for it.

describe('post-lead: a contact claimed by a lead not recorded yet, by another process or one that died', function () {
  this.timeout(60_000);
  let svc: TestService;
  let key: string;
  let dead = 987_000_000;

  before(async () => {
    svc = await TestService.start();
    key = await svc.key();
  });
  after(async () => svc.stop());

  /** What a process that died between its claim and its lead leaves: a claim `agoMs` old, naming that process (or, from a release before claims named theirs, none). */
  async function claimedByADeadProcess(kind: 'mobile' | 'email', value: string, agoMs: number, instance?: string): Promise<number> {
    const leadId = ++dead;
    const data = { lead_id: leadId, claimed_at: new Date(Date.now() - agoMs).toISOString(), ...(instance === undefined ? {} : { instance }) };
    await svc.service.store.append(contactStream(svc.service.contactHashes.hash(kind, value)), [{ type: 'ContactClaimed', data }]);
    return leadId;
  }

  const streamOf = (kind: 'mobile' | 'email', value: string) => svc.service.store.readStream(contactStream(svc.service.contactHashes.hash(kind, value)));

  function expectPending(reply: Reply, fields: string[], maxRetryAfter: number): void {
    expect(reply.status, reply.text).to.equal(409);
    expect(envelopeProblems(reply)).to.deep.equal([]);
    expect(reply.body).to.include({ code: 'DUPLICATE_PENDING', acceptance: 'error', Response: 'Error', lead_id: null, lead_status: null, sold: false });
    expect((reply.body.errors as Array<{ field: string; code: string }>).map((e) => [e.field, e.code])).to.deep.equal(fields.map((f) => [f, 'pending']));
    expect(Number(reply.headers['retry-after'])).to.be.within(1, maxRetryAfter);
  }

  it('the retry of a post cut off after its claims is told to retry, records nothing, and is accepted once the claim lapses', async function () {
    const contact = uniqueContact();
    const lead = leadWith(contact.email, contact.mobile);
    await claimedByADeadProcess('mobile', contact.mobile, CLAIM_IN_FLIGHT_MS - 2_000, 'a-dead-process');

    const first = await svc.post(lead, { 'x-api-key': key });
    expectPending(first, ['mobile'], 2);
    // Nothing recorded: the e-mail it claimed on its way was given back, and its lead has no stream.
    const email = await streamOf('email', contact.email);
    expect(email.map((e) => e.type)).to.deep.equal(['ContactClaimed', 'ContactReleased']);
    const taken = email[0]!.data as { lead_id: number; instance?: string };
    expect(taken.instance, 'the claim names the process that made it').to.be.a('string').with.length.above(8);
    expect(await svc.service.store.readStream(leadStream(taken.lead_id))).to.deep.equal([]);

    // The supplier retries as told: once the claim has lapsed, the post is decided as any other.
    const retried = await until('the retry decided', async () => {
      const reply = await svc.post(lead, { 'x-api-key': key });
      return reply.body.code === 'DUPLICATE_PENDING' ? false : reply;
    });
    expect(retried.status, retried.text).to.equal(201);
    expect(retried.body.code).to.be.oneOf(['SOLD', 'UNSOLD']);
  });

  it('with an Idempotency-Key, the answer to retry is not kept as the key’s: the same key and body are decided anew after it', async function () {
    const contact = uniqueContact();
    const lead = leadWith(contact.email, contact.mobile);
    await claimedByADeadProcess('email', contact.email, CLAIM_IN_FLIGHT_MS - 2_000, 'a-dead-process');
    const headers = { 'x-api-key': key, 'idempotency-key': `pending-${contact.serial}` };

    expectPending(await svc.post(lead, headers), ['email'], 2);
    const retried = await until('the keyed retry decided', async () => {
      const reply = await svc.post(lead, headers);
      return reply.body.code === 'DUPLICATE_PENDING' ? false : reply;
    });
    expect(retried.status, retried.text).to.equal(201);
    expect(retried.headers['idempotency-replayed']).to.equal(undefined);
    const replay = await svc.post(lead, headers);
    expect(replay.headers['idempotency-replayed']).to.equal('true');
    expect(replay.body.lead_id).to.equal(retried.body.lead_id);
  });

  it('a claim from a release before claims named their process is pending too, for a test lead as for a real one; a fresh one is asked about again soon', async function () {
    const contact = uniqueContact();
    await claimedByADeadProcess('mobile', contact.mobile, 0);
    await claimedByADeadProcess('email', contact.email, 0);
    expectPending(await svc.post(leadWith(contact.email, contact.mobile, { test: true }), { 'x-api-key': key }), ['mobile', 'email'], 2);
    expectPending(await svc.post(leadWith(contact.email, contact.mobile), { 'x-api-key': key }), ['mobile', 'email'], 2);
  });

  it('an accepted lead still holding the other contact makes it a DUPLICATE, recorded as ever', async function () {
    const contact = uniqueContact();
    const accepted = await svc.post(leadWith(contact.email, uniqueContact().mobile), { 'x-api-key': key });
    expect(accepted.status, accepted.text).to.equal(201);
    await claimedByADeadProcess('mobile', contact.mobile, 0, 'a-dead-process');

    const copy = await svc.post(leadWith(contact.email, contact.mobile), { 'x-api-key': key });
    expect(copy.status, copy.text).to.equal(409);
    expect(copy.body.code).to.equal('DUPLICATE');
    expect(copy.body.lead_id).to.be.a('number');
    expect((copy.body.errors as Array<{ field: string }>).map((e) => e.field)).to.deep.equal(['email']);
  });
});
