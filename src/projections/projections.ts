import type { RecordedEvent } from '../event-store/port.js';
import type { LeadEvent, LeadReceived } from '../events/lead-events.js';
import type { ReadWrite } from '../read-models/port.js';
import { leadViewChanges, leadViewFeedback } from './lead-view.js';

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

const LEAD_EVENTS = new Set([
  'LeadReceived',
  'LeadRejected',
  'LeadEnriched',
  'LeadRouted',
  'LeadSold',
  'LeadDelivered',
  'LeadDeliveryFailed',
  'FeedbackRecorded',
  'LeadReturned',
]);
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
    const id = String(lead.data.lead_id);
    const feedback = leadViewFeedback(lead);
    if (feedback) return [{ op: 'push', collection: context.collection('leads'), id, position: event.position, field: 'feedback', value: feedback }];
    const set: Record<string, unknown> = { ...leadViewChanges(lead) };
    // A test lead is never delivered: its view says so rather than showing a pending delivery.
    if ('delivery' in set && (await context.received(lead.data.lead_id))?.test) set.delivery = null;
    return [{ op: 'set', collection: context.collection('leads'), id, position: event.position, set }];
  },
};

export const deliveriesProjection: Projection = {
  name: 'deliveries',
  version: 1,
  collections: ['deliveries'],
  indexes: {
    deliveries: [
      ['created_at'],
      ['supplier', 'created_at'],
      ['buyer', 'status', 'created_at'],
      ['bucket', 'status', 'created_at'],
      ['status', 'created_at'],
      ['status', 'next_attempt_at'],
    ],
  },
  async handle(event, context) {
    const lead = asLead(event);
    const id = String(lead.data.lead_id);
    const collection = context.collection('deliveries');
    const write = (set: Record<string, unknown>): ReadWrite[] => [{ op: 'set', collection, id, position: event.position, set }];
    const at = new Date(event.created).toISOString();
    switch (lead.type) {
      case 'LeadSold':
      case 'LeadRouted': {
        if (lead.type === 'LeadRouted' && lead.data.target.kind !== 'bucket') return [];
        const received = await context.received(lead.data.lead_id);
        // A test lead is never delivered, so it has no delivery row.
        if (!received || received.test) return [];
        const target = lead.type === 'LeadSold' ? { buyer: lead.data.buyer, bucket: null } : { buyer: null, bucket: lead.data.target.id };
        const doc = {
          lead_id: lead.data.lead_id,
          supplier: received.supplier,
          ...target,
          status: 'pending',
          attempts: 0,
          last_attempt_at: null,
          last_status_code: null,
          last_error: null,
          delivered_at: null,
          next_attempt_at: lead.type === 'LeadSold' ? at : null,
          created_at: at,
          lead: received.lead,
        };
        return [{ op: 'put', collection, id, position: event.position, doc }];
      }
      case 'LeadDeliveryAttempted':
        return (await isDelivered(context, lead.data.lead_id)) ? write({ attempts: lead.data.attempt, last_attempt_at: lead.data.started_at }) : [];
      case 'LeadDeliveryFailed':
        if (!(await isDelivered(context, lead.data.lead_id))) return [];
        return write({
          status: lead.data.next_attempt_at === null ? 'failed' : 'pending',
          attempts: lead.data.attempt,
          last_attempt_at: lead.data.failed_at,
          last_status_code: lead.data.status,
          last_error: lead.data.error,
          next_attempt_at: lead.data.next_attempt_at,
        });
      case 'LeadDelivered':
        if (!(await isDelivered(context, lead.data.lead_id))) return [];
        return write({
          status: 'delivered',
          attempts: lead.data.attempt,
          last_attempt_at: lead.data.delivered_at,
          last_status_code: lead.data.status,
          last_error: null,
          delivered_at: lead.data.delivered_at,
          next_attempt_at: null,
        });
      default:
        return [];
    }
  },
};

/** Whether a lead has a delivery row at all: a real (non-test) lead. */
async function isDelivered(context: ProjectionContext, leadId: number): Promise<boolean> {
  const received = await context.received(leadId);
  return received !== null && !received.test;
}

export const feedbackProjection: Projection = {
  name: 'feedback',
  version: 1,
  collections: ['feedback'],
  indexes: { feedback: [['recorded_at'], ['supplier', 'recorded_at'], ['buyer', 'recorded_at'], ['type', 'recorded_at']] },
  async handle(event, context) {
    const lead = asLead(event);
    if (lead.type !== 'FeedbackRecorded') return [];
    const received = await context.received(lead.data.lead_id);
    const doc = { ...lead.data, supplier: received?.supplier ?? null };
    return [{ op: 'put', collection: context.collection('feedback'), id: event.id, position: event.position, doc }];
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
    // A return reverses the sale in the bucket the sale was counted in: same hour and dimensions.
    if (lead.type === 'LeadReturned') {
      inc = { returned: 1, returned_cents: cents(lead.data.revenue) };
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

export const PROJECTIONS: readonly Projection[] = [leadsProjection, deliveriesProjection, feedbackProjection, reportsProjection];
