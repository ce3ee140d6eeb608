import { expect } from 'chai';
import { CLAIM_IN_FLIGHT_MS } from '../../src/commands/contacts.js';
import { decide, initialLeadState } from '../../src/commands/post-lead/decider.js';
import { leadStream } from '../../src/events/lead-events.js';
import { contactStream } from '../../src/personal-data/contact-hashes.js';
import { type Consumer, consumers } from '../support/consumers.js';
import { TestService, leadWith } from '../support/service.js';
import { tempDir } from '../support/tmp.js';

// How an erasure or an access request finds a consumer's leads. An accepted lead has claimed the
// consumer's mobile and e-mail, and the claims in the two contact streams name it; its view keeps
// no contact hash. A lead that holds no claim (a test lead, a rejected one) carries the hashes in
// its view, which indexes them. Both are looked at: each test below fails if one is left out.

const run = (Date.now() % 100_000) + 500_000;
const [SOLD_ONLY, TEST_ONLY, PHANTOM, RACING, RELEASED] = consumers(run, [
  ['Evangeline', 'Featherstonehaugh'],
  ['Barnaby', 'Quillfeather'],
  ['Rosalind', 'Ashcombe-Vane'],
  ['Leopold', 'Witherspoon-Hale'],
  ['Cordelia', 'Thistlewood'],
]) as [Consumer, Consumer, Consumer, Consumer, Consumer];

describe('finding a consumer’s leads', function () {
  this.timeout(60_000);
  const dir = tempDir('consumer-leads');
  let svc: TestService;
  let admin: string;
  let supplier: string;

  const post = (consumer: Consumer, overrides: Record<string, unknown> = {}) =>
    svc.post(leadWith(consumer.email, consumer.mobile, { first_name: consumer.first_name, last_name: consumer.last_name, ...overrides }), { 'x-api-key': supplier });
  const lookup = (body: unknown) => svc.post(body, { 'x-api-key': admin }, '/functions/consumers/lookup');
  const erase = (body: unknown) => svc.post(body, { 'x-api-key': admin }, '/functions/erasures');
  const viewOf = async (leadId: number) => svc.service.readModels.get(svc.service.projections.collection('leads'), String(leadId));

  before(async function () {
    svc = await TestService.start({ dataDir: dir.path });
    supplier = await svc.key();
    admin = await svc.key('admin', 'root');
  });

  after(async function () {
    await svc?.stop().catch(() => {});
    dir.remove();
  });

  it('an accepted lead, whose view keeps no contact hash, is found by its claims', async function () {
    const sold = await post(SOLD_ONLY);
    expect(sold.status, sold.text).to.equal(201);
    const leadId = sold.body.lead_id as number;
    await svc.service.projections.waitFor(await svc.service.store.headPosition());
    const view = await viewOf(leadId);
    expect(view, 'the lead is projected').to.include({ lead_status: 'sold' });
    expect(view).to.not.have.any.keys('contact_email', 'contact_mobile');

    for (const by of [{ email: SOLD_ONLY.email }, { mobile: SOLD_ONLY.national }]) {
      const reply = await lookup(by);
      expect(reply.status, reply.text).to.equal(200);
      expect((reply.body.items as Array<Record<string, unknown>>).map((i) => i.lead_id), JSON.stringify(Object.keys(by))).to.deep.equal([leadId]);
    }
  });

  it('an accepted lead whose claims were given back (released after it landed) is still found by them', async function () {
    const [sold] = await svc.service.store.readStream(contactStream(svc.service.contactHashes.hash('mobile', SOLD_ONLY.mobile)));
    const leadId = (sold!.data as { lead_id: number }).lead_id;
    for (const kind of ['mobile', 'email'] as const) {
      const stream = contactStream(svc.service.contactHashes.hash(kind, SOLD_ONLY[kind]));
      await svc.service.store.append(stream, [{ type: 'ContactReleased', data: { lead_id: leadId, released_at: new Date().toISOString() } }]);
    }
    const reply = await lookup({ email: SOLD_ONLY.email, mobile: SOLD_ONLY.mobile });
    expect((reply.body.items as Array<Record<string, unknown>>).map((i) => i.lead_id)).to.deep.equal([leadId]);
  });

  it('a test lead, which claims nothing, is found by the hashes its view carries, and erased', async function () {
    const posted = await post(TEST_ONLY, { test: true });
    expect(posted.status, posted.text).to.equal(201);
    expect(posted.body.code).to.equal('SOLD');
    const leadId = posted.body.lead_id as number;
    expect(await svc.service.store.readStream(contactStream(svc.service.contactHashes.hash('email', TEST_ONLY.email))), 'no claim').to.deep.equal([]);

    const found = await lookup({ email: TEST_ONLY.email });
    expect((found.body.items as Array<Record<string, unknown>>).map((i) => i.lead_id)).to.deep.equal([leadId]);
    const erased = await erase({ mobile: TEST_ONLY.mobile });
    expect(erased.status, erased.text).to.equal(201);
    expect(erased.body.erasure).to.include({ leads_erased: 1 });
    expect((erased.body.erasure as { lead_ids: number[] }).lead_ids).to.deep.equal([leadId]);
  });

  /** The consumer's lead, posted; a lead id that will never have a stream; and the consumer's mobile stream, for the claims a failed post leaves. */
  async function postedBesideAFailedPost(consumer: Consumer): Promise<{ leadId: number; never: number; stream: string }> {
    const posted = await post(consumer);
    expect(posted.status, posted.text).to.equal(201);
    const leadId = posted.body.lead_id as number;
    return { leadId, never: leadId + 1_000_000, stream: contactStream(svc.service.contactHashes.hash('mobile', consumer.mobile)) };
  }

  it('a claim whose lead was never recorded (its post failed after claiming) names no lead: not listed, not erased, no stream made for it', async function () {
    const { leadId, never, stream } = await postedBesideAFailedPost(PHANTOM);
    // What a post that failed after its claims leaves: a claim for a lead id with no stream, lapsed.
    const lapsed = new Date(Date.now() - CLAIM_IN_FLIGHT_MS - 1000).toISOString();
    await svc.service.store.append(stream, [{ type: 'ContactClaimed', data: { lead_id: never, claimed_at: lapsed } }]);

    const found = await lookup({ mobile: PHANTOM.mobile });
    expect((found.body.items as Array<Record<string, unknown>>).map((i) => i.lead_id)).to.deep.equal([leadId]);
    const erased = await erase({ email: PHANTOM.email, mobile: PHANTOM.mobile });
    expect(erased.status, erased.text).to.equal(201);
    expect((erased.body.erasure as { lead_ids: number[] }).lead_ids).to.deep.equal([leadId]);
    expect(await svc.service.store.readStream(leadStream(never))).to.deep.equal([]);
  });

  it('a claim given back (its post failed and released it) is not waited for: the erasure answers without waiting for it to lapse', async function () {
    const { leadId, never, stream } = await postedBesideAFailedPost(RELEASED);
    // What a post that failed after its claims and gave them back leaves: a fresh claim, then its release.
    const now = new Date().toISOString();
    await svc.service.store.append(stream, [
      { type: 'ContactClaimed', data: { lead_id: never, claimed_at: now } },
      { type: 'ContactReleased', data: { lead_id: never, released_at: now } },
    ]);
    const started = Date.now();
    const erased = await erase({ mobile: RELEASED.mobile });
    expect(erased.status, erased.text).to.equal(201);
    expect((erased.body.erasure as { lead_ids: number[] }).lead_ids).to.deep.equal([leadId]);
    // Waiting for the released claim would have taken until it lapsed, CLAIM_IN_FLIGHT_MS after it.
    expect(Date.now() - started).to.be.below(CLAIM_IN_FLIGHT_MS / 2);
  });

  it('a post that claimed the contacts and records its lead while the erasure runs is waited for, and erased', async function () {
    const hashes = { mobile: svc.service.contactHashes.hash('mobile', RACING.mobile), email: svc.service.contactHashes.hash('email', RACING.email) };
    const leadId = 900_000_000 + (run % 1000);
    const claimedAt = new Date();
    // The post's claims, made before the erasure is asked; its lead is recorded 300 ms later.
    for (const hash of Object.values(hashes)) {
      await svc.service.store.append(contactStream(hash), [{ type: 'ContactClaimed', data: { lead_id: leadId, claimed_at: claimedAt.toISOString() } }]);
    }
    const lead = {
      first_name: RACING.first_name, last_name: RACING.last_name, email: RACING.email, mobile: RACING.mobile, mobile_national: RACING.national,
      zip: '90210', zip4: null, accident_state: 'CA', certificate_url: 'https://cert.trustedform.com/x', certificate_id: 'x', sid: 'sid-1', s1: null, test: false,
    };
    const pass = { result: 'pass' as const, provider: 'test', detail: 'ok' };
    const events = await decide(
      {
        leadId, supplier: 'supplier', keyId: 'k', now: claimedAt, contacts: hashes, validation: { ok: true, lead },
        enrichment: { phone: pass, email: pass, consent: pass },
        routing: { target: { kind: 'bucket', id: 'unsold' }, price: 0, currency: 'USD', strategy: 'highest_price', version: 'test', candidates: [] },
      },
      initialLeadState,
    );
    const landing = new Promise<void>((resolve, reject) => {
      setTimeout(() => void svc.service.store.append(leadStream(leadId), events.map((event) => ({ ...event, metadata: {} })), { expectedRevision: 'no_stream' }).then(() => resolve(), reject), 300);
    });

    const erased = await erase({ email: RACING.email, suppress: true });
    await landing;
    expect(erased.status, erased.text).to.equal(201);
    expect((erased.body.erasure as { lead_ids: number[] }).lead_ids, 'the racing post’s lead').to.deep.equal([leadId]);
    const marked = await svc.service.store.readStream(leadStream(leadId));
    expect(marked.map((event) => event.type)).to.include('LeadPersonalDataErased');
  });
});
