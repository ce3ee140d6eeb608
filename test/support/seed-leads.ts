import { createHash } from 'node:crypto';
import { type PostLeadCommand, decide, initialLeadState } from '../../src/commands/post-lead/decider.js';
import type { EventStore } from '../../src/event-store/port.js';
import { LEAD_EVENT_SCHEMA, leadStream } from '../../src/events/lead-events.js';
import type { NormalisedLead } from '../../src/leads/lead.js';
import { type NewLeadEvent, deliveryAttempted, deliveryFailed, feedbackRecorded, leadDelivered, returned } from './lead-events.js';

// Many leads written straight into the event store, as the service records them, for tests and
// benches that need a large history: posting them one request at a time would take far longer.

const pass = { result: 'pass' as const, provider: 'bench', detail: 'ok' };
/** Version 1: LeadReceived reads as an older release wrote it (in clear, upcast to 2), the rest as current. */
const SEEDED_METADATA = { schema: LEAD_EVENT_SCHEMA };

/** What varies from lead to lead beyond the fixed mix of outcomes. */
interface LeadShape {
  /** When lead n was received. */
  readonly receivedAt: (n: number) => Date;
  readonly s1: (n: number) => string;
}

/** One lead a second from 2026-11-01, s1 among a thousand click ids. */
const BENCH_SHAPE: LeadShape = {
  receivedAt: (n) => new Date(Date.UTC(2026, 10, 1) + n * 1000),
  s1: (n) => `click-${n % 1000}`,
};

/**
 * Lead n's post-time events: a tenth are duplicates (rejected), a quarter of the rest go to the
 * unsold bucket, the others are sold for 25 to one of three buyers; five suppliers, twenty
 * sources, four states.
 */
function leadEvents(n: number, shape: LeadShape = BENCH_SHAPE) {
  const lead: NormalisedLead = {
    first_name: 'Ada', last_name: 'Lovelace', email: `ada.${n}@example.com`, mobile: '+12135550143', mobile_national: '2135550143',
    zip: '90210', zip4: null, accident_state: ['CA', 'TX', 'NY', 'FL'][n % 4]!, certificate_url: 'https://cert.trustedform.com/x',
    certificate_id: 'x', sid: `sid-${n % 20}`, s1: shape.s1(n), test: false,
  };
  // The keyed hashes of its contacts, as every valid lead records them (stand-ins, one pair per lead).
  const contacts = { mobile: createHash('sha256').update(`mobile\n${n}`).digest('hex'), email: createHash('sha256').update(`email\n${n}`).digest('hex') };
  const base = { leadId: n, supplier: `sup-${n % 5}`, keyId: 'k', now: shape.receivedAt(n), validation: { ok: true as const, lead }, contacts };
  const command: PostLeadCommand =
    n % 10 === 0
      ? { ...base, duplicates: ['email'] }
      : {
          ...base,
          enrichment: { phone: pass, email: pass, consent: pass },
          routing: {
            target: n % 4 === 1 ? { kind: 'bucket', id: 'unsold' } : { kind: 'buyer', id: `buyer-${n % 3}` },
            price: 25, currency: 'USD', strategy: 'highest_price', version: 'bench',
            candidates: [{ buyer: 'buyer-0', price: 25, eligible: true, reason: 'eligible' }],
          },
        };
  return decide(command, initialLeadState);
}

/** The buyer lead n is sold to, or null when it is not sold (see leadEvents). */
const buyerOf = (n: number): string | null => (n % 10 === 0 || n % 4 === 1 ? null : `buyer-${n % 3}`);
const isUnsold = (n: number): boolean => n % 10 !== 0 && n % 4 === 1;
/** Leads received between a lead's sale and the buyer's feedback on it: about three hours at one a second. */
const FEEDBACK_AFTER_LEADS = 10_800;

/**
 * What happens to lead n after its post, each a separate append as the service makes them: a sold
 * lead's webhook delivery (one in ten fails once, and is delivered on the retry), half the unsold
 * leads pulled by their bucket's buyer; and, for the lead sold FEEDBACK_AFTER_LEADS leads before
 * (hours earlier, so no cache of recent leads holds it any more), the buyer's feedback on three
 * in ten and a return on one in twenty.
 */
function afterSaleAppends(n: number, first: number, at: Date): Array<{ leadId: number; events: NewLeadEvent[] }> {
  const appends: Array<{ leadId: number; events: NewLeadEvent[] }> = [];
  const iso = (ms: number) => new Date(at.getTime() + ms).toISOString();
  const buyer = buyerOf(n);
  if (buyer) {
    if (n % 10 === 3) {
      appends.push({ leadId: n, events: [deliveryAttempted(n, buyer, 1, iso(100))] });
      appends.push({ leadId: n, events: [deliveryFailed(n, buyer, 1, iso(400), { next_attempt_at: iso(30_400) })] });
      appends.push({ leadId: n, events: [deliveryAttempted(n, buyer, 2, iso(30_400))] });
      appends.push({ leadId: n, events: [leadDelivered(n, buyer, 2, iso(30_500))] });
    } else {
      appends.push({ leadId: n, events: [deliveryAttempted(n, buyer, 1, iso(100))] });
      appends.push({ leadId: n, events: [leadDelivered(n, buyer, 1, iso(200))] });
    }
  } else if (isUnsold(n) && n % 2 === 0) {
    appends.push({ leadId: n, events: [leadDelivered(n, 'bucket-buyer', 1, iso(60_000), { via: 'pull' })] });
  }
  const earlier = n - FEEDBACK_AFTER_LEADS;
  const soldTo = earlier >= first ? buyerOf(earlier) : null;
  if (soldTo && earlier % 20 === 7) appends.push({ leadId: earlier, events: returned(earlier, soldTo, 25, 'bad_phone', iso(0)) });
  else if (soldTo && [2, 5, 8].includes(earlier % 10)) appends.push({ leadId: earlier, events: [feedbackRecorded(earlier, soldTo, 'contacted', iso(0))] });
  return appends;
}

export interface SeedOptions {
  /** Stop after this many events (about: a lead's events are written together)… */
  readonly events?: number;
  /** …or after exactly this many leads. */
  readonly leads?: number;
  readonly firstLeadId?: number;
  readonly shape?: LeadShape;
  /**
   * The store is behind the event codec (from openEventStore): the codec stamps each type's
   * version and encrypts each lead's personal fields, as for a post. Else the events are written
   * raw at version 1, LeadReceived in clear as an older release wrote it.
   */
  readonly viaCodec?: boolean;
  /**
   * Also what follows a post in a real log (see afterSaleAppends): deliveries, feedback, returns.
   * Without it, only the post's events: nearly every event makes a new document in each projection.
   */
  readonly afterSale?: boolean;
}

export interface Seeded {
  readonly leads: number;
  readonly events: number;
  readonly sold: number;
  readonly revenueCents: number;
}

/** Appends leads' events to the store, 200 writers at a time, as the service would. */
export async function seedLeads(store: Pick<EventStore, 'append'>, options: SeedOptions): Promise<Seeded> {
  const first = options.firstLeadId ?? 1;
  const more = () => (options.leads !== undefined ? next < first + options.leads : written < (options.events ?? 0));
  let written = 0;
  let next = first;
  let sold = 0;
  let revenueCents = 0;
  const writer = async () => {
    while (more()) {
      const n = next++;
      const batch = leadEvents(n, options.shape);
      written += batch.length;
      for (const event of batch) {
        if (event.type === 'LeadSold') {
          sold += 1;
          revenueCents += Math.round(event.data.revenue * 100);
        }
      }
      await store.append(leadStream(n), batch.map((event) => ({ ...event, metadata: options.viaCodec ? {} : SEEDED_METADATA })), { expectedRevision: 'no_stream' });
      if (!options.afterSale) continue;
      for (const { leadId, events } of afterSaleAppends(n, first, (options.shape ?? BENCH_SHAPE).receivedAt(n))) {
        written += events.length;
        await store.append(leadStream(leadId), events);
      }
    }
  };
  await Promise.all(Array.from({ length: 200 }, writer));
  return { leads: next - first, events: written, sold, revenueCents };
}

/** Appends about `events` lead events to the store, the first lead numbered `firstLeadId`. */
export async function seedLeadEvents(store: Pick<EventStore, 'append'>, events: number, firstLeadId = 1, viaCodec = false): Promise<number> {
  return (await seedLeads(store, { events, firstLeadId, viaCodec })).events;
}
