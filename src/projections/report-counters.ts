import type { RecordedEvent } from '../event-store/port.js';
import type { LeadEvent } from '../events/lead-events.js';

// What one event adds to the summary report, in one place for the two read models that carry it:
// the reports' hourly buckets add it up per hour and dimensions, and each lead's view keeps what
// its own events added (a report by s1 sums those). A new counter is added here, and in SUMMED.

export interface ReportCounts {
  /** Counter name → amount, e.g. `{ received: 1, accepted: 1, sold: 1, revenue_cents: 2500 }`. */
  readonly counts: Record<string, number>;
  /** The buyer the counts go under, when the event names one. */
  readonly buyer: string | null;
  /** The currency of the money counted (a sale's, a return's), null when none is: money of two currencies is never added up. */
  readonly currency: string | null;
}

export const cents = (amount: number) => Math.round(amount * 100);

/** The report counters an event adds, or null when it adds none. */
export function reportCounts(event: Pick<RecordedEvent, 'type' | 'data'>): ReportCounts | null {
  const e = event as unknown as LeadEvent;
  switch (e.type) {
    case 'LeadRejected':
      return { counts: { received: 1, rejected: 1, [`rejected_${e.data.code}`]: 1 }, buyer: null, currency: null };
    case 'LeadRouted':
      return e.data.target.kind === 'bucket' ? { counts: { received: 1, accepted: 1, unsold: 1 }, buyer: null, currency: null } : null;
    case 'LeadSold':
      return { counts: { received: 1, accepted: 1, sold: 1, revenue_cents: cents(e.data.revenue) }, buyer: e.data.buyer, currency: e.data.currency };
    // A return reverses the sale where the sale was counted: the same hour, dimensions and lead.
    case 'LeadReturned':
      return { counts: { returned: 1, returned_cents: cents(e.data.revenue) }, buyer: e.data.buyer, currency: e.data.currency };
    default:
      return null;
  }
}

/**
 * The field of a lead's view that holds one of its report counters: `report_sold`. Prefixed, since
 * the view has fields of its own named like some counters (`sold`, `returned`).
 */
export const leadCounterField = (counter: string): `report_${string}` => `report_${counter}`;
