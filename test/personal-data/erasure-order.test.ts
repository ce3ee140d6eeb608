import { expect } from 'chai';
import { shredLeads } from '../../src/commands/erasure.js';
import { EventStoreUnavailableError } from '../../src/event-store/port.js';
import { leadStream } from '../../src/events/lead-events.js';
import { overriding } from '../support/overriding.js';
import { TestService, validLead } from '../support/service.js';

// An erasure marks each lead (LeadPersonalDataErased, its pending delivery cancelled) before it
// destroys the lead's data key. Keys destroyed first and a mark that then failed to land (the event
// store down: the request answered 503) left a lead whose key was gone here but still cached in
// the delivery worker, with no mark to stop it: its pending delivery went out to the buyer, name,
// e-mail and phone. Marked first, every reader refuses the lead from the mark on; the key goes
// after, and a run cut between the two leaves keys that the request, asked again, destroys.

describe('an erasure marks the lead before its key goes', function () {
  this.timeout(30_000);
  let svc: TestService;
  before(async () => (svc = await TestService.start()));
  after(async () => svc.stop());

  const keyOf = async (leadId: number) => {
    const [received] = await svc.service.store.readStream(leadStream(leadId), { maxCount: 1 });
    return ((received!.data as { lead: { pii: { key: string } } }).lead.pii.key);
  };
  const erase = { type: 'Erase' as const, erasureId: 'e'.repeat(32), now: new Date() };

  it('a mark that cannot be recorded: the request fails and the key is still there (nothing half done)', async function () {
    const posted = await svc.post(validLead(), { 'x-api-key': await svc.key() });
    const leadId = posted.body.lead_id as number;
    const destroyed: string[][] = [];
    const keys = overriding(svc.service.personalData, { destroy: async (ids: readonly string[]) => void destroyed.push([...ids]) });
    const down = overriding(svc.service.store, { append: () => Promise.reject(new EventStoreUnavailableError('disk full')) });
    const failed = await shredLeads(down, keys, [leadId], erase, { causationId: 'test' }).then(() => null, (error: unknown) => error);
    expect(failed).to.be.instanceOf(EventStoreUnavailableError);
    expect(destroyed).to.deep.equal([]);
    expect(await svc.service.personalData.get(await keyOf(leadId))).to.not.equal(null);
    expect((await svc.service.store.readStream(leadStream(leadId))).map((e) => e.type)).to.not.include('LeadPersonalDataErased');
  });

  it('a key store that fails after the marks: the lead is marked (its delivery cancelled), and asked again its key is destroyed', async function () {
    const posted = await svc.post(validLead(), { 'x-api-key': await svc.key() });
    const leadId = posted.body.lead_id as number;
    const keyId = await keyOf(leadId);
    const failing = overriding(svc.service.personalData, { destroy: () => Promise.reject(new EventStoreUnavailableError('key store down')) });
    const failed = await shredLeads(svc.service.store, failing, [leadId], erase, { causationId: 'test' }).then(() => null, (error: unknown) => error);
    expect(failed).to.be.instanceOf(EventStoreUnavailableError);
    const types = (await svc.service.store.readStream(leadStream(leadId))).map((e) => e.type);
    expect(types).to.include.members(['LeadPersonalDataErased', 'LeadDeliveryCancelled']);

    const destroyed: string[][] = [];
    const keys = overriding(svc.service.personalData, { destroy: async (ids: readonly string[]) => void destroyed.push([...ids]) });
    const again = await shredLeads(svc.service.store, keys, [leadId], erase, { causationId: 'test' });
    expect(again).to.deep.equal({ marked: [], erased: [leadId], untouched: [] });
    expect(destroyed).to.deep.equal([[keyId]]);
  });
});
