import type { RecordedEvent } from '../event-store/port.js';
import type { LeadEvent, LeadReceived } from '../events/lead-events.js';
import type { ReadWrite } from '../read-models/port.js';
import { leadViewChanges } from './lead-view.js';

// The projections from `$all` into read models. Each has a name and a version: a new version
// rebuilds into new collections (`leads_v2`) and the service switches when it has caught up.

export interface ProjectionContext {
  /** The LeadReceived of a lead: from memory when the lead's events arrived together, else from its stream. */
  received(leadId: number): Promise<LeadReceived['data'] | null>;
  /** The physical name of one of this projection's collections in the version being built. */
  collection(base: string): string;
}

export interface Projection {
  readonly name: string;
  readonly version: number;
  readonly collections: readonly string[];
  readonly indexes: Readonly<Record<string, ReadonlyArray<readonly string[]>>>;
  handle(event: RecordedEvent, context: ProjectionContext): Promise<ReadWrite[]>;
}

const LEAD_EVENTS = new Set(['LeadReceived', 'LeadRejected', 'LeadEnriched', 'LeadRouted', 'LeadSold']);
const asLead = (event: RecordedEvent) => event as unknown as LeadEvent & RecordedEvent;
const cents = (amount: number) => Math.round(amount * 100);

export const leadsProjection: Projection = {
  name: 'leads',
  version: 1,
  collections: ['leads'],
  indexes: { leads: [['supplier', 'lead_id']] },
  async handle(event, context) {
    if (!LEAD_EVENTS.has(event.type)) return [];
    const lead = asLead(event);
    const set: Record<string, unknown> = { ...leadViewChanges(lead) };
    // A test lead is never delivered: its view says so rather than showing a pending delivery.
    if ('delivery' in set && (await context.received(lead.data.lead_id))?.test) set.delivery = null;
    return [{ op: 'set', collection: context.collection('leads'), id: String(lead.data.lead_id), position: event.position, set }];
  },
};

export const deliveriesProjection: Projection = {
  name: 'deliveries',
  version: 1,
  collections: ['deliveries'],
  indexes: {
    deliveries: [['created_at'], ['supplier', 'created_at'], ['buyer', 'status', 'created_at'], ['bucket', 'status', 'created_at'], ['status', 'created_at']],
  },
  async handle(event, context) {
    const lead = asLead(event);
    let target: { buyer: string | null; bucket: string | null } | null = null;
    if (lead.type === 'LeadSold') target = { buyer: lead.data.buyer, bucket: null };
    if (lead.type === 'LeadRouted' && lead.data.target.kind === 'bucket') target = { buyer: null, bucket: lead.data.target.id };
    if (!target) return [];
    const received = await context.received(lead.data.lead_id);
    if (!received || received.test) return [];
    return [
      {
        op: 'put',
        collection: context.collection('deliveries'),
        id: String(lead.data.lead_id),
        position: event.position,
        doc: {
          lead_id: lead.data.lead_id,
          supplier: received.supplier,
          ...target,
          status: 'pending',
          attempts: 0,
          last_attempt_at: null,
          last_status_code: null,
          delivered_at: null,
          created_at: new Date(event.created).toISOString(),
          lead: received.lead,
        },
      },
    ];
  },
};

/** Report dimensions, in the order of a bucket's key. */
export const REPORT_DIMENSIONS = ['supplier', 'sid', 's1', 'state', 'buyer', 'test'] as const;

export const reportsProjection: Projection = {
  name: 'reports',
  version: 1,
  collections: ['report_buckets'],
  indexes: { report_buckets: [['hour'], ['supplier', 'hour']] },
  async handle(event, context) {
    const lead = asLead(event);
    let inc: Record<string, number> | null = null;
    let buyer: string | null = null;
    if (lead.type === 'LeadRejected') inc = { received: 1, rejected: 1, [`rejected_${lead.data.code}`]: 1 };
    if (lead.type === 'LeadRouted' && lead.data.target.kind === 'bucket') inc = { received: 1, accepted: 1, unsold: 1 };
    if (lead.type === 'LeadSold') {
      inc = { received: 1, accepted: 1, sold: 1, revenue_cents: cents(lead.data.revenue) };
      buyer = lead.data.buyer;
    }
    if (!inc) return [];
    const received = await context.received(lead.data.lead_id);
    if (!received) return [];
    // Hourly buckets in UTC: a report in any whole-hour time zone folds them into its local days.
    const hour = received.received_at.slice(0, 13);
    const dims = { supplier: received.supplier, sid: received.sid, s1: received.s1, state: received.accident_state, buyer, test: received.test };
    const id = JSON.stringify([hour, ...REPORT_DIMENSIONS.map((d) => dims[d])]);
    return [{ op: 'inc', collection: context.collection('report_buckets'), id, position: event.position, inc, setOnInsert: { hour, ...dims } }];
  },
};

export const PROJECTIONS: readonly Projection[] = [leadsProjection, deliveriesProjection, reportsProjection];
