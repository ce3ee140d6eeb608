import { expect } from 'chai';
import type { MxResolver } from '../../src/enrichment/email.js';
import { leadStream } from '../../src/events/lead-events.js';
import { contactStream } from '../../src/personal-data/contact-hashes.js';
import { type Reply, TestService, leadWith } from '../support/service.js';
import { until } from '../support/until.js';
import { RECORD_BY_MS } from '../../src/commands/contacts.js';
import { uniqueContact } from './helpers.js';

// A post claims its consumer's mobile and e-mail before its checks, and records its lead after
// them. A second post of the same consumer (a copy, or a corrected resubmission) that reaches the
// same process meanwhile waits for the first to end and is then decided by what the first became:
// a duplicate of an accepted lead, or the consumer's first lead when the first was rejected. The
// e-mail check of a domain whose DNS answer the test holds back keeps the first post under way
// (until the checks' one-second deadline).

describe('post-lead: a copy posted while a post of the same consumer is under way in the same process', function () {
  this.timeout(60_000);
  let svc: TestService;
  let key: string;
  const asked = new Set<string>();
  const held: Array<() => void> = [];
  const resolver: MxResolver = {
    resolveMx: async (domain) => {
      asked.add(domain);
      if (domain.startsWith('held-')) await new Promise<void>((resolve) => held.push(resolve));
      return [{ exchange: `mx.${domain}`, priority: 10 }];
    },
    resolveAddresses: async () => ['192.0.2.10'],
  };

  before(async () => {
    svc = await TestService.start({ resolver, env: { MX_TIMEOUT_MS: '5000' } });
    key = await svc.key();
  });
  after(async () => {
    held.forEach((answer) => answer());
    await svc.stop();
  });

  /** Posts the first lead, waits until it is in its checks (its contacts claimed), then posts the copy; both replies, in the order they came. */
  async function firstThenCopy(first: Record<string, unknown>, copy: Record<string, unknown>, domain: string): Promise<{ first: Reply; copy: Reply; order: string[] }> {
    const order: string[] = [];
    const firstReply = svc.post(first, { 'x-api-key': key }).then((reply) => (order.push('first'), reply));
    await until('the first post in its checks', async () => asked.has(domain));
    const copyReply = svc.post(copy, { 'x-api-key': key }).then((reply) => (order.push('copy'), reply));
    return { first: await firstReply, copy: await copyReply, order };
  }

  it('when the first lead is rejected, the copy is the consumer’s first lead and sells', async function () {
    const contact = uniqueContact();
    const domain = `held-${contact.serial}.example.com`;
    const email = `lead.${contact.serial}@${domain}`;
    // The consumer's first submission has a toll-free number (the phone check fails it); the second the right one.
    const { first, copy, order } = await firstThenCopy(leadWith(email, `+1800555${1000 + (contact.serial % 9000)}`), leadWith(email, contact.mobile), domain);
    expect(first.status, first.text).to.equal(422);
    expect(first.body.code).to.equal('VERIFICATION_FAILED');
    expect(copy.status, copy.text).to.equal(201);
    expect(copy.body).to.include({ code: 'SOLD', sold: true });
    expect(order).to.deep.equal(['first', 'copy']);
  });

  it('when the first lead is accepted, the copy waits for it and is its duplicate', async function () {
    const contact = uniqueContact();
    const domain = `held-${contact.serial}.example.com`;
    const email = `lead.${contact.serial}@${domain}`;
    const other = uniqueContact();
    const { first, copy, order } = await firstThenCopy(leadWith(email, contact.mobile), leadWith(email, other.mobile), domain);
    expect(first.status, first.text).to.equal(201);
    expect(copy.status, copy.text).to.equal(409);
    expect(copy.body.code).to.equal('DUPLICATE');
    expect((copy.body.errors as Array<{ field: string }>).map((error) => error.field)).to.deep.equal(['email']);
    expect(order, 'the copy was answered once the first lead was recorded').to.deep.equal(['first', 'copy']);
  });
});

// A contact claim whose lead is not recorded counts for CLAIM_IN_FLIGHT_MS: after that, another
// post may take the contact. A post that has not begun its lead's append RECORD_BY_MS after its
// claims (a store stalled) could land after that, so it records nothing, or one consumer could be
// sold twice. The clock is moved on past RECORD_BY_MS while the post is in its checks.
describe('post-lead: a post slower than its contact claims last', function () {
  this.timeout(60_000);
  let svc: TestService;
  let key: string;
  let skew = 0;
  const resolver: MxResolver = {
    resolveMx: async (domain) => {
      if (domain.startsWith('stalled-')) skew += RECORD_BY_MS + 1_000;
      return [{ exchange: `mx.${domain}`, priority: 10 }];
    },
    resolveAddresses: async () => ['192.0.2.10'],
  };

  before(async () => {
    svc = await TestService.start({ resolver, now: () => new Date(Date.now() + skew) });
    key = await svc.key();
  });
  after(async () => svc.stop());

  it('records nothing and is answered 503; its contacts are given back, and the retry is decided afresh', async function () {
    const contact = uniqueContact();
    const email = `lead.${contact.serial}@stalled-${contact.serial}.example.com`;
    const lead = leadWith(email, contact.mobile);
    const slow = await svc.post(lead, { 'x-api-key': key });
    expect(slow.status, slow.text).to.equal(503);
    expect(slow.body).to.include({ code: 'UNAVAILABLE', lead_id: null });
    const emailStream = contactStream(svc.service.contactHashes.hash('email', email));
    const types = await until('its e-mail claim given back', async () => {
      const events = (await svc.service.store.readStream(emailStream)).map((event) => event.type);
      return events.includes('ContactReleased') ? events : undefined;
    });
    expect(types).to.deep.equal(['ContactClaimed', 'ContactReleased']);
    const claimed = (await svc.service.store.readStream(emailStream))[0]!.data as { lead_id: number };
    expect(await svc.service.store.readStream(leadStream(claimed.lead_id))).to.deep.equal([]);
    // The domain's answer is kept: the retry's checks take no time, and it sells.
    const retry = await svc.post(lead, { 'x-api-key': key });
    expect(retry.status, retry.text).to.equal(201);
    expect(retry.body).to.include({ code: 'SOLD' });
  });
});
