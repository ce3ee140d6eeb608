import { expect } from 'chai';
import { leadStream } from '../../src/events/lead-events.js';
import { type Consumer, consumers, contentsOf, filesUnder, found } from '../support/consumers.js';
import { TestService, validLead } from '../support/service.js';
import { tempDir } from '../support/tmp.js';

// A client that sends a consumer's contact as a member name (a map keyed by e-mail, a form
// flattened into JSON) must not have it echoed: errors name an unknown field only when its name
// reads as a field name. The lead path records its errors in clear with the rejected lead, where
// no erasure can find them, so there the name would have stayed on disk for good.

const run = (Date.now() % 100_000) + 500_000;
const [SENT] = consumers(run, [['Evangeline', 'Quarrington']]) as [Consumer];

describe('a consumer sent as a member name', function () {
  this.timeout(60_000);
  const dir = tempDir('member-names');
  let svc: TestService;
  const answers: string[] = [];

  before(async function () {
    svc = await TestService.start({ dataDir: dir.path, logLevel: 'trace' });
  });

  after(async function () {
    await svc?.stop().catch(() => {});
    dir.remove();
  });

  const named = (consumer: Consumer) => ({ [consumer.email]: true, [consumer.mobile]: 1, [consumer.national]: 'x' });

  it('a lead: 422 INVALID, the names said as `*`, in the answer and in its recorded events', async function () {
    const supplier = await svc.key();
    const reply = await svc.post({ ...validLead(), ...named(SENT), FIRST_NAME: 'x' }, { 'x-api-key': supplier });
    answers.push(reply.text);
    expect(reply.status, reply.text).to.equal(422);
    expect(reply.body.code).to.equal('INVALID');
    const errors = reply.body.errors as Array<{ field: string; code: string }>;
    // A misspelt field is still named, so that the supplier can fix it.
    expect(errors.map((e) => `${e.field} ${e.code}`)).to.have.members(['FIRST_NAME unknown_field', '* unknown_field']);
    const events = await svc.service.store.readStream(leadStream(reply.body.lead_id as number));
    expect(found([{ where: 'the lead events', bytes: Buffer.from(JSON.stringify(events)) }], SENT)).to.deep.equal([]);
  });

  it('a ping, an erasure, an access request and a buyer\'s feedback: 422, the names never echoed', async function () {
    const [supplier, admin, buyer] = [await svc.key(), await svc.key('admin', 'root'), await svc.key('buyer', 'acme-law')];
    const sold = await svc.post(validLead(), { 'x-api-key': supplier });
    expect(sold.body.code, sold.text).to.equal('SOLD');
    const refusals = [
      await svc.post({ zip: '90210', accident_state: 'CA', sid: 'src-1', ...named(SENT) }, { 'x-api-key': supplier }, '/functions/pings'),
      await svc.post({ email: `x.${run}@example.com`, ...named(SENT) }, { 'x-api-key': admin }, '/functions/erasures'),
      await svc.post({ email: `x.${run}@example.com`, ...named(SENT) }, { 'x-api-key': admin }, '/functions/consumers/lookup'),
      await svc.post({ type: 'contacted', ...named(SENT) }, { 'x-api-key': buyer }, `/functions/leads/${sold.body.lead_id as number}/feedback`),
    ];
    for (const reply of refusals) {
      answers.push(reply.text);
      expect(reply.status, reply.text).to.equal(422);
      expect((reply.body.errors as Array<{ field: string; code: string }>).map((e) => `${e.field} ${e.code}`)).to.deep.equal(['* unknown_field']);
    }
    expect(found([{ where: 'the answers', bytes: Buffer.from(answers.join('\n')) }], SENT)).to.deep.equal([]);
  });

  it('after a checkpoint, no file of the data dir nor the log (at trace level) holds them', async function () {
    const logs = svc.logs.join('');
    await svc.stop();
    const contents = contentsOf(filesUnder(dir.path));
    contents.push({ where: 'the logs', bytes: Buffer.from(logs) });
    expect(found(contents, SENT)).to.deep.equal([]);
    expect(contents.map((c) => c.where).some((file) => file.endsWith('events.db'))).to.equal(true);
  });
});
