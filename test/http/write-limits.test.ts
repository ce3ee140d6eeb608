import { expect } from 'chai';
import { TestService, validLead } from '../support/service.js';

// Every route that takes a key is limited per key, not posts and reads alone: a buyer's feedback
// and acknowledgements, an admin's erasures append to the event store as posts do, and a runaway
// integration (or a stolen key) looping on them would fill it. Writes share the posts' buckets
// (RATE_LIMIT_PER_SECOND), the other routes the reads' (READ_RATE_LIMIT_PER_SECOND).

describe('the rate limits of the routes besides posting and reading', function () {
  this.timeout(30_000);
  let svc: TestService;
  before(async () => {
    svc = await TestService.start({ env: { RATE_LIMIT_PER_SECOND: '1', RATE_LIMIT_BURST: '2', READ_RATE_LIMIT_PER_SECOND: '1', READ_RATE_LIMIT_BURST: '2' } });
  });
  after(() => svc.stop());

  it('a buyer sending feedback in a loop is answered 429 with Retry-After once its bucket is empty, and nothing more is recorded', async function () {
    const supplier = await svc.key('supplier', 'sup-1');
    const sold = await svc.post(validLead(), { 'x-api-key': supplier });
    expect(sold.body.code, sold.text).to.equal('SOLD');
    const leadId = sold.body.lead_id as number;
    // A CA lead sells to the highest bidder for it.
    const buyer = await svc.key('buyer', 'acme-law');
    // Each one new (the same contact sent again would be answered 200 from the first, recording nothing).
    const feedback = (reason: string) => svc.post({ type: 'contacted', reason }, { 'x-api-key': buyer }, `/functions/leads/${leadId}/feedback`);
    const replies = [await feedback('first_call'), await feedback('second_call'), await feedback('third_call')];
    expect(replies.map((reply) => reply.status)).to.deep.equal([201, 201, 429]);
    expect(replies[2]!.body.code).to.equal('RATE_LIMITED');
    expect(Number(replies[2]!.headers['retry-after'])).to.be.at.least(1);
    const recorded = (await svc.service.store.readStream(`lead-${leadId}`)).filter((event) => event.type === 'FeedbackRecorded');
    expect(recorded).to.have.length(2);
  });

  it('an admin key: erasures in the writes’ bucket, /functions/me in the reads’', async function () {
    const admin = await svc.key('admin', 'root');
    const erase = () => svc.post({ email: 'nobody.at.all@outlook.com' }, { 'x-api-key': admin }, '/functions/erasures');
    expect((await Promise.all([erase(), erase(), erase()])).map((reply) => reply.status).sort()).to.deep.equal([200, 201, 429]);
    const me = () => svc.request('GET', '/functions/me', { 'x-api-key': admin });
    expect([(await me()).status, (await me()).status, (await me()).status]).to.deep.equal([200, 200, 429]);
  });
});
