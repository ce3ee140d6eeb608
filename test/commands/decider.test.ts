import { expect } from 'chai';
import type { Enrichment } from '../../src/enrichment/check.js';
import type { LeadEvent } from '../../src/events/lead-events.js';
import type { NormalisedLead } from '../../src/leads/lead.js';
import {
  LeadAlreadyRecordedError,
  type PostLeadCommand,
  type RoutingDecision,
  type LeadState,
  decide,
  foldLead,
  outcomeOf,
} from '../../src/commands/post-lead/decider.js';
import { OUTCOMES, leadEnvelope } from '../../src/http/envelope.js';

/** What the service answers for a lead in this state under a routing file in `currency`: the domain's outcome, rendered by the HTTP shell. */
const envelopeOf = (state: LeadState, traceId: string, currency = 'USD') => {
  const outcome = outcomeOf(state, currency);
  return { status: OUTCOMES[outcome.code].status, envelope: leadEnvelope(outcome, traceId) };
};

// given(events) / when(command) / then(events), and the envelope folded from them.
const given = (events: LeadEvent[]) => ({
  when: (command: PostLeadCommand) => ({
    then: (expected: Array<Pick<LeadEvent, 'type'> & { data?: Record<string, unknown> }>) => {
      const events2 = decide(command, foldLead(events));
      expect(events2.map((e) => e.type)).to.deep.equal(expected.map((e) => e.type));
      expected.forEach((e, i) => e.data && expect(events2[i]!.data).to.deep.include(e.data));
      return events2;
    },
  }),
});

const lead: NormalisedLead = {
  first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com', mobile: '+12025550143', mobile_national: '2025550143',
  zip: '90210', zip4: null, accident_state: 'CA', certificate_url: `https://cert.trustedform.com/${'a'.repeat(40)}`,
  certificate_id: 'a'.repeat(40), sid: 'src-1', s1: 'click-9', test: false,
};
const pass = (provider: string) => ({ result: 'pass' as const, provider, detail: 'ok' });
const enrichment: Enrichment = { phone: pass('libphonenumber'), email: pass('dns-mx'), consent: pass('certificate-rules') };
const now = new Date('2026-11-21T15:00:00Z');
const base = { leadId: 42, supplier: 'sup-1', keyId: 'k1', now, validation: { ok: true as const, lead } };
const toBuyer: RoutingDecision = {
  target: { kind: 'buyer', id: 'acme-law' }, price: 42.5, currency: 'USD', strategy: 'highest_price', version: 'v1',
  candidates: [{ buyer: 'acme-law', price: 42.5, eligible: true, reason: 'eligible' }, { buyer: 'tx', price: 10, eligible: false, reason: 'state_not_allowed' }],
};

describe('post-lead decider', function () {
  it('sold: received, enriched, routed to the buyer, sold at its price → 201 SOLD', function () {
    const events = given([]).when({ ...base, enrichment, routing: toBuyer }).then([
      { type: 'LeadReceived', data: { lead_id: 42, supplier: 'sup-1', sid: 'src-1', s1: 'click-9', test: false, lead } },
      { type: 'LeadEnriched', data: { checks: enrichment } },
      { type: 'LeadRouted', data: { target: { kind: 'buyer', id: 'acme-law' }, price: 42.5, candidates: toBuyer.candidates } },
      { type: 'LeadSold', data: { buyer: 'acme-law', revenue: 42.5, currency: 'USD' } },
    ]);
    const { status, envelope } = envelopeOf(foldLead(events), 'f'.repeat(32));
    expect(status).to.equal(201);
    expect(envelope).to.deep.equal({
      ok: true, trace_id: 'f'.repeat(32), acceptance: 'accepted', lead_id: 42, lead_status: 'sold', sold: true, revenue: 42.5,
      currency: 'USD', code: 'SOLD', message: 'Lead accepted and sold.', Response: 'Success',
    });
  });

  it('unsold: routed to a bucket, no sale → 201 UNSOLD with revenue 0', function () {
    const routing: RoutingDecision = { ...toBuyer, target: { kind: 'bucket', id: 'unsold' }, price: 0 };
    const events = given([]).when({ ...base, enrichment, routing }).then([
      { type: 'LeadReceived' }, { type: 'LeadEnriched' }, { type: 'LeadRouted', data: { target: { kind: 'bucket', id: 'unsold' }, price: 0 } },
    ]);
    const { status, envelope } = envelopeOf(foldLead(events), 'a'.repeat(32));
    expect([status, envelope.code, envelope.lead_status, envelope.sold, envelope.revenue, envelope.ok]).to.deep.equal([201, 'UNSOLD', 'unsold', false, 0, true]);
  });

  it('invalid: received without a lead, rejected with every field error → 422 INVALID', function () {
    const errors = [{ field: 'email', code: 'invalid_format', message: 'email is not a valid e-mail address' }];
    const validation = { ok: false as const, errors, partial: { sid: 'src-1', s1: null, accident_state: null, test: false } };
    const events = given([]).when({ ...base, validation }).then([
      { type: 'LeadReceived', data: { lead: null, sid: 'src-1' } },
      { type: 'LeadRejected', data: { code: 'INVALID', errors } },
    ]);
    const { status, envelope } = envelopeOf(foldLead(events), 'a'.repeat(32));
    expect([status, envelope.acceptance, envelope.lead_status, envelope.Response, envelope.lead_id]).to.deep.equal([422, 'rejected', 'rejected', 'Failure', 42]);
    expect(envelope.errors).to.deep.equal(errors);
  });

  it('duplicate: rejected before enrichment → 409 DUPLICATE', function () {
    const events = given([]).when({ ...base, duplicates: ['mobile'] }).then([{ type: 'LeadReceived' }, { type: 'LeadRejected', data: { code: 'DUPLICATE' } }]);
    expect(envelopeOf(foldLead(events), 'a'.repeat(32)).status).to.equal(409);
  });

  it('duplicate: one errors entry per matching field, in the event and the envelope, never the value', function () {
    const entry = (field: string) => ({ field, code: 'duplicate', message: `${field} matches a lead accepted within the duplicate window` });
    for (const [duplicates, fields] of [[['mobile'], ['mobile']], [['email'], ['email']], [['mobile', 'email'], ['mobile', 'email']]] as const) {
      const events = given([]).when({ ...base, duplicates }).then([
        { type: 'LeadReceived' }, { type: 'LeadRejected', data: { code: 'DUPLICATE', errors: fields.map(entry) } },
      ]);
      const { envelope } = envelopeOf(foldLead(events), 'a'.repeat(32));
      expect(envelope.errors).to.deep.equal(fields.map(entry));
      const text = JSON.stringify(envelope.errors);
      for (const value of [lead.email, lead.mobile, lead.mobile_national, 'sup-1']) expect(text).to.not.contain(value);
    }
  });

  it('no matching field is not a duplicate', function () {
    given([]).when({ ...base, duplicates: [], enrichment, routing: toBuyer }).then([
      { type: 'LeadReceived' }, { type: 'LeadEnriched' }, { type: 'LeadRouted' }, { type: 'LeadSold' },
    ]);
  });

  it('verification failed: phone or e-mail fail rejects, naming the field; consent fail alone does not', function () {
    const failed = { ...enrichment, email: { result: 'fail' as const, provider: 'disposable-list', detail: 'disposable_domain' } };
    const events = given([]).when({ ...base, enrichment: failed }).then([
      { type: 'LeadReceived' }, { type: 'LeadEnriched' }, { type: 'LeadRejected', data: { code: 'VERIFICATION_FAILED' } },
    ]);
    const { status, envelope } = envelopeOf(foldLead(events), 'a'.repeat(32));
    expect(status).to.equal(422);
    expect(envelope.errors!.map((e) => e.field)).to.deep.equal(['email']);

    const consentOnly = { ...enrichment, consent: { result: 'fail' as const, provider: 'certificate-rules', detail: 'x' } };
    given([]).when({ ...base, enrichment: consentOnly, routing: toBuyer }).then([
      { type: 'LeadReceived' }, { type: 'LeadEnriched' }, { type: 'LeadRouted' }, { type: 'LeadSold' },
    ]);
  });

  it('unknown checks pass (flagged in the event), they do not reject', function () {
    const unknown = { ...enrichment, email: { result: 'unknown' as const, provider: 'dns-mx', detail: 'timeout' } };
    given([]).when({ ...base, enrichment: unknown, routing: toBuyer }).then([
      { type: 'LeadReceived' }, { type: 'LeadEnriched', data: { checks: unknown } }, { type: 'LeadRouted' }, { type: 'LeadSold' },
    ]);
  });

  it('a test lead is flagged in its events and in the envelope', function () {
    const test = { ok: true as const, lead: { ...lead, test: true } };
    const events = given([]).when({ ...base, validation: test, enrichment, routing: toBuyer }).then([
      { type: 'LeadReceived', data: { test: true } }, { type: 'LeadEnriched' }, { type: 'LeadRouted' }, { type: 'LeadSold' },
    ]);
    expect(envelopeOf(foldLead(events), 'a'.repeat(32)).envelope.test).to.equal(true);
  });

  it('revenue is rounded to 2 decimals', function () {
    const events = given([]).when({ ...base, enrichment, routing: { ...toBuyer, price: 10.005 } }).then([
      { type: 'LeadReceived' }, { type: 'LeadEnriched' }, { type: 'LeadRouted' }, { type: 'LeadSold' },
    ]);
    expect(envelopeOf(foldLead(events), 'a'.repeat(32)).envelope.revenue).to.equal(10.01);
  });

  it("a lead no routing priced states its money in the routing file's currency; a routed one in the currency its routing recorded", function () {
    const invalid = { ok: false as const, errors: [{ field: 'zip', code: 'invalid_format', message: 'zip is not in the expected format' }], partial: { sid: 'src-1', s1: null, accident_state: null, test: false } };
    const failed = { ...enrichment, phone: { result: 'fail' as const, provider: 'libphonenumber', detail: 'toll_free' } };
    const mismatch = { code: 'PING_MISMATCH' as const, errors: [{ field: 'zip', code: 'ping_mismatch', message: "zip differs from the ping's" }] };
    const rejected = [
      given([]).when({ ...base, validation: invalid }).then([{ type: 'LeadReceived' }, { type: 'LeadRejected', data: { code: 'INVALID' } }]),
      given([]).when({ ...base, duplicates: ['email'] }).then([{ type: 'LeadReceived' }, { type: 'LeadRejected', data: { code: 'DUPLICATE' } }]),
      given([]).when({ ...base, suppressed: ['mobile'] }).then([{ type: 'LeadReceived' }, { type: 'LeadRejected', data: { code: 'SUPPRESSED' } }]),
      given([]).when({ ...base, pingRejection: mismatch }).then([{ type: 'LeadReceived' }, { type: 'LeadRejected', data: { code: 'PING_MISMATCH' } }]),
      given([]).when({ ...base, enrichment: failed }).then([{ type: 'LeadReceived' }, { type: 'LeadEnriched' }, { type: 'LeadRejected', data: { code: 'VERIFICATION_FAILED' } }]),
    ];
    for (const events of rejected) {
      expect(envelopeOf(foldLead(events), 'a'.repeat(32), 'EUR').envelope).to.include({ revenue: 0, currency: 'EUR' });
    }
    // Priced under a file in euros, answered under one in dollars (an idempotent retry after a restart): euros, as recorded.
    const inEuros = { ...toBuyer, currency: 'EUR' };
    const sold = given([]).when({ ...base, enrichment, routing: inEuros }).then([
      { type: 'LeadReceived' }, { type: 'LeadEnriched' }, { type: 'LeadRouted', data: { currency: 'EUR' } }, { type: 'LeadSold', data: { currency: 'EUR' } },
    ]);
    expect(envelopeOf(foldLead(sold), 'a'.repeat(32), 'USD').envelope).to.include({ code: 'SOLD', revenue: 42.5, currency: 'EUR' });
    const unsold = given([]).when({ ...base, enrichment, routing: { ...inEuros, target: { kind: 'bucket', id: 'unsold' }, price: 0 } }).then([
      { type: 'LeadReceived' }, { type: 'LeadEnriched' }, { type: 'LeadRouted', data: { currency: 'EUR' } },
    ]);
    expect(envelopeOf(foldLead(unsold), 'a'.repeat(32), 'USD').envelope).to.include({ code: 'UNSOLD', revenue: 0, currency: 'EUR' });
  });

  it('a lead already recorded cannot be decided again', function () {
    const events = decide({ ...base, duplicates: ['email'] }, foldLead([]));
    expect(() => decide({ ...base, duplicates: ['email'] }, foldLead(events))).to.throw(LeadAlreadyRecordedError);
  });
});
