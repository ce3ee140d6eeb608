import { expect } from 'chai';
import { TestService, validLead } from '../support/service.js';
import { tempDir } from '../support/tmp.js';

// An erasure and an access request wait for the read models to reach the event store's head. An
// API instance whose projector is down anywhere would wait for ever: the request never answered,
// and an erasure went on once a projector came back, after its caller had given up. The wait is
// bounded (30 s; shorter here): 503 UNAVAILABLE, nothing recorded, to be asked again.

describe('an erasure with no projector running anywhere', function () {
  this.timeout(60_000);
  const dir = tempDir('erasure-no-projector');
  let api: TestService | undefined;
  after(async () => {
    await api?.stop();
    dir.remove();
  });

  it('answers 503 once the read models have not caught up within its wait, recording nothing; so does an access request', async function () {
    api = await TestService.start({ dataDir: dir.path, env: { LEADPOST_ROLES: 'api' }, catchUpMs: 1_000 });
    const admin = { 'x-api-key': await api.key('admin', 'root') };
    const lead = validLead();
    const posted = await api.post(lead, { 'x-api-key': await api.key() });
    expect(posted.status, posted.text).to.equal(201);
    const started = Date.now();
    const erased = await api.post({ email: lead.email }, admin, '/functions/erasures');
    expect([erased.status, erased.body.code], erased.text).to.deep.equal([503, 'UNAVAILABLE']);
    expect(Date.now() - started, 'answered once its wait was over, not before').to.be.at.least(1_000);
    const events = await api.service.store.readStream(`lead-${posted.body.lead_id as number}`);
    expect(events.map((e) => e.type)).to.not.include('LeadPersonalDataErased');
    const looked = await api.post({ email: lead.email }, admin, '/functions/consumers/lookup');
    expect([looked.status, looked.body.code], looked.text).to.deep.equal([503, 'UNAVAILABLE']);
  });
});
