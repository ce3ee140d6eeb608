import type { PostLeadCommand } from '../../src/commands/post-lead/decider.js';
import type { NormalisedLead } from '../../src/leads/lead.js';

// The post-lead commands of the projection tests' fixed history: lead i + 1 of supplier i % 2,
// a duplicate every 7th, a test lead every 10th, a third of them to a bucket, the rest sold.

const pass = { result: 'pass' as const, provider: 'p', detail: 'ok' };
export function leadCommand(i: number): PostLeadCommand {
  const lead: NormalisedLead = {
    first_name: 'Ada', last_name: 'L', email: `a${i}@example.com`, mobile: `+1213555${String(1000 + i)}`, mobile_national: `213555${1000 + i}`,
    zip: '90210', zip4: null, accident_state: i % 3 === 0 ? 'TX' : 'CA', certificate_url: 'https://cert.trustedform.com/x', certificate_id: 'x',
    sid: `sid-${i % 4}`, s1: null, test: i % 10 === 9,
  };
  const base = { leadId: i + 1, supplier: `sup-${i % 2}`, keyId: 'k', now: new Date(Date.UTC(2026, 10, 20, i % 24)), validation: { ok: true as const, lead } };
  if (i % 7 === 6) return { ...base, duplicates: ['mobile'] };
  const enrichment = { phone: pass, email: pass, consent: pass };
  const target = i % 3 === 0 ? { kind: 'bucket' as const, id: 'unsold' } : { kind: 'buyer' as const, id: `buyer-${i % 2}` };
  return { ...base, enrichment, routing: { target, price: 10 + i, currency: 'USD', strategy: 'highest_price', version: 'v', candidates: [] } };
}

