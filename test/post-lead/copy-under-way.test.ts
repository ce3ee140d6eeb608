import { expect } from 'chai';
import type { MxResolver } from '../../src/enrichment/email.js';
import { type Reply, TestService, leadWith } from '../support/service.js';
import { until } from '../support/until.js';
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
