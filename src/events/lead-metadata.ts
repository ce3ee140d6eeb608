import type { EventMetadata } from '../event-store/port.js';
import { LEAD_EVENT_SCHEMA } from './lead-events.js';

// The metadata every event of a lead's stream carries, whoever appends it: the post, the delivery
// worker, or a buyer's ack and feedback. One shape, so `leadpost events`, a projection or an
// auditor can follow any event back to the request that caused it and to the post that began it.

/** The API key's principal that asked for an event appended after the post. */
export interface ActingPrincipal {
  /** The key's role (`buyer`, or `admin` acting for the buyer). */
  readonly role: string;
  /** The name it acts for: a buyer id, an admin's name. */
  readonly id: string;
  readonly key_id: string;
}

export interface LeadEventOrigin {
  /** The trace of the request that appended the event; for the delivery worker, the sale's. */
  readonly traceId: string | null;
  /** The trace of the post that began the lead: shared by every event of the lead. */
  readonly correlationId: string | null;
  /** What triggered the append: `request:<trace id>`, or `delivery:<lead id>` for the worker. */
  readonly causationId: string;
  /** The supplier that posted the lead. */
  readonly supplierId: string | null;
  /** Who asked, when a request after the post did; the post's own actor is the supplier. */
  readonly principal?: ActingPrincipal;
}

export function leadEventMetadata(origin: LeadEventOrigin, at: Date): EventMetadata {
  return {
    trace_id: origin.traceId,
    schema: LEAD_EVENT_SCHEMA,
    occurred_at: at.toISOString(),
    supplier_id: origin.supplierId,
    correlation_id: origin.correlationId,
    causation_id: origin.causationId,
    ...(origin.principal ? { principal: origin.principal } : {}),
  };
}

/**
 * The lead's correlation id, from its first event (`LeadReceived`): the correlation id the post
 * recorded, else its trace id.
 */
export function leadCorrelation(first: { readonly metadata?: EventMetadata } | undefined): string | null {
  const metadata = first?.metadata ?? {};
  const id = metadata.correlation_id ?? metadata.trace_id;
  return typeof id === 'string' ? id : null;
}
