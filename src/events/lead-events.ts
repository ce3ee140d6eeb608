import type { Enrichment } from '../enrichment/check.js';
import type { FieldError } from '../http/envelope.js';
import type { NormalisedLead } from '../leads/lead.js';

// The events of a lead's own stream, `lead-{lead_id}` (DESIGN.md §5). Facts, never rewritten: a
// change of shape adds a schema version and an upcaster, it does not edit these.

export const LEAD_EVENT_SCHEMA = 1;

export const leadStream = (leadId: number): string => `lead-${leadId}`;

export type RejectionCode = 'INVALID' | 'VERIFICATION_FAILED' | 'DUPLICATE';

export interface LeadReceived {
  readonly type: 'LeadReceived';
  readonly data: {
    readonly lead_id: number;
    readonly supplier: string;
    readonly key_id: string;
    readonly sid: string | null;
    readonly s1: string | null;
    readonly accident_state: string | null;
    readonly test: boolean;
    /** The normalised lead; null when it failed validation (nothing trustworthy to keep). */
    readonly lead: NormalisedLead | null;
    readonly received_at: string;
  };
}

export interface LeadRejected {
  readonly type: 'LeadRejected';
  readonly data: { readonly lead_id: number; readonly code: RejectionCode; readonly errors: FieldError[]; readonly rejected_at: string };
}

export interface LeadEnriched {
  readonly type: 'LeadEnriched';
  readonly data: { readonly lead_id: number; readonly checks: Enrichment };
}

export interface RoutingCandidate {
  readonly buyer: string;
  readonly price: number;
  readonly eligible: boolean;
  readonly reason: string;
  readonly detail?: string;
}

export interface LeadRouted {
  readonly type: 'LeadRouted';
  readonly data: {
    readonly lead_id: number;
    readonly target: { readonly kind: 'buyer' | 'bucket'; readonly id: string };
    readonly price: number;
    readonly currency: string;
    readonly strategy: string;
    readonly routing_version: string;
    readonly candidates: RoutingCandidate[];
  };
}

export interface LeadSold {
  readonly type: 'LeadSold';
  readonly data: { readonly lead_id: number; readonly buyer: string; readonly revenue: number; readonly currency: string; readonly sold_at: string };
}

export type LeadEvent = LeadReceived | LeadRejected | LeadEnriched | LeadRouted | LeadSold;
