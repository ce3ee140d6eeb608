import { expect } from 'chai';
import type { Enrichment } from '../../src/enrichment/check.js';
import type { MxResolver } from '../../src/enrichment/email.js';
import { TestService } from '../support/service.js';
import { envelopeProblems, leadEvents, uniqueContact, uniqueLead } from './helpers.js';

// The e-mail check through the real HTTPS service, on a resolver that answers "no such domain" for
// every name (as some sandboxes and captive networks do), with the default canary (gmail.com):
// such DNS must never turn good leads away.

const nxdomain = () => Promise.reject(Object.assign(new Error('queryMx ENOTFOUND'), { code: 'ENOTFOUND' }));
const NXDOMAIN_EVERYWHERE: MxResolver = { resolveMx: nxdomain, resolveAddresses: nxdomain };

async function checks(svc: TestService, leadId: number): Promise<Enrichment> {
  const events = await leadEvents(svc, leadId);
  return (events.find((e) => e.type === 'LeadEnriched')!.data as { checks: Enrichment }).checks;
}

describe('post-lead: the e-mail check when DNS says NXDOMAIN for every name', function () {
  this.timeout(60_000);
  let svc: TestService;
  let key: string;

  before(async () => {
    svc = await TestService.start({ resolver: NXDOMAIN_EVERYWHERE });
    key = await svc.key();
  });
  after(async () => {
    await svc?.stop();
  });

  it('an @gmail.com lead is accepted, its e-mail passed without a lookup (sold to a buyer that requires pass)', async () => {
    const contact = uniqueContact();
    const reply = await svc.post(uniqueLead({ email: `ada.${contact.serial}@gmail.com` }), { 'x-api-key': key });
    expect(reply.status, reply.text).to.equal(201);
    expect(envelopeProblems(reply)).to.deep.equal([]);
    // acme-law requires email: pass and buys CA leads at 42.50.
    expect(reply.body).to.include({ code: 'SOLD', revenue: 42.5 });
    expect((await checks(svc, reply.body.lead_id as number)).email).to.deep.equal({ result: 'pass', provider: 'mailbox-providers', detail: 'well_known_provider' });
  });

  it('a lead of another domain is accepted with its e-mail unknown, not rejected', async () => {
    const contact = uniqueContact();
    const reply = await svc.post(uniqueLead({ email: `ada.${contact.serial}@law-firm.example` }), { 'x-api-key': key });
    expect(reply.status, reply.text).to.equal(201);
    // Not acme-law (it requires pass): the next buyer.
    expect(reply.body).to.include({ code: 'SOLD', revenue: 12.75 });
    expect((await checks(svc, reply.body.lead_id as number)).email).to.deep.equal({ result: 'unknown', provider: 'dns-mx', detail: 'dns_unreliable' });
  });
});
