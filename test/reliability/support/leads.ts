// What a lead stream must look like, read straight from the event store, and leads whose contacts
// are unique within a data dir (a counter, not the clock, so a long run never repeats a number).

import type { EventStore, RecordedEvent } from '../../../src/event-store/index.js';
import { leadWith, testMobile } from '../../support/service.js';

/** The events one post appends, in one atomic append, for each recorded outcome (decider.ts). */
const POST_TIME_EVENTS: Readonly<Record<string, readonly string[]>> = {
  SOLD: ['LeadReceived', 'LeadEnriched', 'LeadRouted', 'LeadSold'],
  UNSOLD: ['LeadReceived', 'LeadEnriched', 'LeadRouted'],
  INVALID: ['LeadReceived', 'LeadRejected'],
  DUPLICATE: ['LeadReceived', 'LeadRejected'],
  VERIFICATION_FAILED: ['LeadReceived', 'LeadEnriched', 'LeadRejected'],
};

/** What may follow an accepted lead's post-time events later (delivery, feedback, returns). */
const LATER_EVENTS = new Set(['LeadDeliveryAttempted', 'LeadDelivered', 'LeadDeliveryFailed', 'FeedbackRecorded', 'LeadReturned']);

export interface LeadOutcome {
  readonly leadId: number;
  readonly code: string;
  readonly revenue: number;
  readonly test: boolean;
  readonly supplier: string;
  readonly buyer: string | null;
  readonly traceId: string;
  readonly events: readonly RecordedEvent[];
}

/** Every `lead-{id}` stream in `$all`, its events in order. */
export async function leadStreams(store: EventStore): Promise<Map<number, RecordedEvent[]>> {
  const streams = new Map<number, RecordedEvent[]>();
  for (const event of await store.readAll()) {
    const match = /^lead-(\d+)$/.exec(event.streamId);
    if (!match) continue;
    const id = Number(match[1]);
    const events = streams.get(id);
    if (events) events.push(event);
    else streams.set(id, [event]);
  }
  return streams;
}

/**
 * The outcome a lead stream records, or the reasons it is not a whole lead: it must open with the
 * complete post-time events of one outcome, all from one commit (one atomic append), each naming
 * the lead, and only delivery and feedback events may follow an accepted one.
 */
export function readLead(leadId: number, events: readonly RecordedEvent[]): { outcome?: LeadOutcome; problems: string[] } {
  const problems: string[] = [];
  const types = events.map((e) => e.type);
  const first = events[0];
  if (!first || first.type !== 'LeadReceived') return { problems: [`lead-${leadId}: starts with ${types[0] ?? 'nothing'}, not LeadReceived`] };
  let code: string | undefined;
  if (types[1] === 'LeadRejected') code = (events[1]!.data as { code: string }).code;
  else if (types[1] === 'LeadEnriched' && types[2] === 'LeadRejected') code = (events[2]!.data as { code: string }).code;
  else if (types[1] === 'LeadEnriched' && types[2] === 'LeadRouted') {
    const kind = (events[2]!.data as { target: { kind: string } }).target.kind;
    code = kind === 'bucket' ? 'UNSOLD' : types[3] === 'LeadSold' ? 'SOLD' : undefined;
  }
  const shape = code === undefined ? undefined : POST_TIME_EVENTS[code];
  if (!shape || types.slice(0, shape.length).join() !== shape.join()) {
    return { problems: [`lead-${leadId}: partial or unknown event sequence ${types.join(', ')}`] };
  }
  const posted = events.slice(0, shape.length);
  if (new Set(posted.map((e) => e.position.commit)).size !== 1) problems.push(`lead-${leadId}: post-time events span several commits`);
  if (posted.some((e) => (e.data as { lead_id?: unknown }).lead_id !== leadId)) problems.push(`lead-${leadId}: an event names another lead`);
  const later = types.slice(shape.length);
  const accepted = code === 'SOLD' || code === 'UNSOLD';
  if (later.some((type) => !accepted || !LATER_EVENTS.has(type))) problems.push(`lead-${leadId} (${code}): unexpected later events ${later.join(', ')}`);
  const received = first.data as { supplier: string; test: boolean };
  const sold = code === 'SOLD' ? (events[3]!.data as { revenue: number; buyer: string }) : null;
  return {
    problems,
    outcome: {
      leadId,
      code: code!,
      revenue: sold?.revenue ?? 0,
      test: received.test,
      supplier: received.supplier,
      buyer: sold?.buyer ?? null,
      traceId: String(first.metadata.trace_id),
      events,
    },
  };
}

export interface Totals {
  received: number;
  accepted: number;
  sold: number;
  unsold: number;
  rejected: number;
  rejected_INVALID: number;
  rejected_VERIFICATION_FAILED: number;
  rejected_DUPLICATE: number;
  revenue: number;
}

function emptyTotals(): Totals {
  return { received: 0, accepted: 0, sold: 0, unsold: 0, rejected: 0, rejected_INVALID: 0, rejected_VERIFICATION_FAILED: 0, rejected_DUPLICATE: 0, revenue: 0 };
}

/** The report figures the outcomes add up to (revenue summed in cents, as reports do). */
export function totalsOf(outcomes: Iterable<LeadOutcome>): Totals {
  const totals = emptyTotals();
  let cents = 0;
  for (const o of outcomes) {
    totals.received += 1;
    if (o.code === 'SOLD' || o.code === 'UNSOLD') totals.accepted += 1;
    if (o.code === 'SOLD') totals.sold += 1;
    if (o.code === 'UNSOLD') totals.unsold += 1;
    if (o.code === 'INVALID' || o.code === 'VERIFICATION_FAILED' || o.code === 'DUPLICATE') {
      totals.rejected += 1;
      totals[`rejected_${o.code}`] += 1;
    }
    cents += Math.round(o.revenue * 100);
  }
  totals.revenue = cents / 100;
  return totals;
}

/** Sums report rows into the same figures. */
export function totalsOfRows(rows: ReadonlyArray<Record<string, unknown>>): Totals {
  const totals = emptyTotals();
  let cents = 0;
  for (const row of rows) {
    for (const key of Object.keys(totals) as Array<keyof Totals>) {
      if (key === 'revenue') cents += Math.round(Number(row.revenue ?? 0) * 100);
      else totals[key] += Number(row[key] ?? 0);
    }
  }
  totals.revenue = cents / 100;
  return totals;
}

// ---------------------------------------------------------------------------------------------

/** A valid, sellable CA lead whose mobile and e-mail are the n-th of this run (n < 6.2 million). */
export function leadNumber(n: number, overrides: Record<string, unknown> = {}, tag = 'rel'): Record<string, unknown> {
  return leadWith(`${tag}.${n}@example.com`, testMobile(n), overrides);
}
