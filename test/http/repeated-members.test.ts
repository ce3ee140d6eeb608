import { expect } from 'chai';
import { TestService, validLead } from '../support/service.js';

// A member given twice in a JSON body is refused on every route that takes one, as on a post: JSON
// keeps the last value without a word, while the client's own code, a proxy or a log may have read
// the first. Each answer is 422 INVALID naming the field once, and nothing is recorded.

describe('a member given twice in a JSON body, on every route that takes one', function () {
  this.timeout(30_000);
  let svc: TestService;
  let admin: string;
  let buyer: string;
  let leadId: number;

  before(async () => {
    svc = await TestService.start();
    admin = await svc.key('admin', 'root');
    buyer = await svc.key('buyer', 'acme-law');
    const sold = await svc.post(validLead(), { 'x-api-key': await svc.key() });
    expect(sold.body.code, sold.text).to.equal('SOLD');
    leadId = sold.body.lead_id as number;
  });
  after(() => svc.stop());

  const post = (path: string, key: string, text: string) => svc.post(text, { 'x-api-key': key }, path);
  const leadEvents = async () => (await svc.service.store.readStream(`lead-${leadId}`)).length;

  it('feedback: the field named once, beside every other failing field, and nothing recorded', async function () {
    const before = await leadEvents();
    const reply = await post(`/functions/leads/${leadId}/feedback`, buyer, '{"type":"conversion","type":"return","reason":"bad_phone","note":1}');
    expect([reply.status, reply.body.code], reply.text).to.deep.equal([422, 'INVALID']);
    expect(reply.body.errors).to.deep.include({ field: 'type', code: 'repeated', message: 'type is given more than once in the body' });
    expect((reply.body.errors as Array<{ field: string }>).map((error) => error.field)).to.have.members(['type', 'note']);
    expect(await leadEvents()).to.equal(before);
  });

  it('feedback whose type is given twice: only the type is named, no rule of the type it was not given applied', async function () {
    const reply = await post(`/functions/leads/${leadId}/feedback`, buyer, '{"type":"conversion","type":"return"}');
    expect([reply.status, reply.body.code], reply.text).to.deep.equal([422, 'INVALID']);
    expect(reply.body.errors).to.deep.equal([{ field: 'type', code: 'repeated', message: 'type is given more than once in the body' }]);
  });

  it('an erasure: the contact named once (never its value), and no consumer erased', async function () {
    const reply = await post('/functions/erasures', admin, '{"email":"a@outlook.com","email":"b@outlook.com"}');
    expect([reply.status, reply.body.code], reply.text).to.deep.equal([422, 'INVALID']);
    expect(reply.body.errors).to.deep.equal([{ field: 'email', code: 'repeated', message: 'email is given more than once in the body' }]);
    expect(reply.text).to.not.contain('outlook.com');
    expect(await svc.service.store.readAll()).to.satisfy((events: Array<{ type: string }>) => events.every((event) => event.type !== 'ConsumerErased'));
  });

  it('a consumer lookup: the contact named once', async function () {
    const reply = await post('/functions/consumers/lookup', admin, '{"mobile":"+12025550143","mobile":"+12025550144"}');
    expect([reply.status, reply.body.code], reply.text).to.deep.equal([422, 'INVALID']);
    expect(reply.body.errors).to.deep.equal([{ field: 'mobile', code: 'repeated', message: 'mobile is given more than once in the body' }]);
  });

  it('a redelivery: its reason named once, and the lead left as it was', async function () {
    const before = await leadEvents();
    const reply = await post(`/functions/deliveries/${leadId}/redeliver`, admin, '{"reason":"buyer_outage","reason":"Bad Reason"}');
    expect([reply.status, reply.body.code], reply.text).to.deep.equal([422, 'INVALID']);
    expect(reply.body.errors).to.deep.equal([{ field: 'reason', code: 'repeated', message: 'reason is given more than once in the body' }]);
    expect(await leadEvents()).to.equal(before);
  });
});
