import type { Enrichment } from '../../enrichment/check.js';
import { type FieldError, type LeadOutcome, type LeadOutcomeCode, money } from '../../leads/outcome.js';
import type { LeadValidation } from '../../leads/validate.js';
import type { LeadContacts, LeadEvent, RejectionCode, RoutingCandidate } from '../../events/lead-events.js';
import type { LeadPingMatched } from '../../events/ping-events.js';
import type { Decider } from '../handler.js';
import type { ContactKind } from '../contacts.js';

// The post-lead decider: decide(command, state) → events, evolve(state, event) → state. The I/O
// stages (validation, duplicate claims, enrichment, cap reservations) run before it and hand their
// results in, so every outcome rule is a pure function of its inputs.

export interface RoutingDecision {
  readonly target: { readonly kind: 'buyer' | 'bucket'; readonly id: string };
  readonly price: number;
  readonly currency: string;
  readonly strategy: string;
  readonly version: string;
  readonly candidates: RoutingCandidate[];
}

export interface PostLeadCommand {
  readonly leadId: number;
  readonly supplier: string;
  readonly keyId: string;
  readonly now: Date;
  readonly validation: LeadValidation;
  /** The lead's ping_id refused it (expired, already posted, other fields): it ends there. */
  readonly pingRejection?: { readonly code: Extract<RejectionCode, `PING_${string}`>; readonly errors: FieldError[] };
  /** The lead came with a ping: the bid it was sold at (buyer null: none could take it, routed as a plain post). */
  readonly pingMatch?: Omit<LeadPingMatched['data'], 'lead_id'>;
  /** The fields (mobile, email) whose value an accepted lead holds within the window. Consulted only for a valid lead. */
  readonly duplicates?: readonly ContactKind[];
  /** The fields (mobile, email) an erasure suppressed. Consulted only for a valid lead, before duplicates. */
  readonly suppressed?: readonly ContactKind[];
  /** The keyed hashes of a valid lead's contacts, recorded with it so an erasure finds it. */
  readonly contacts?: LeadContacts;
  /** Present once a valid, non-duplicate lead has been checked. */
  readonly enrichment?: Enrichment;
  /** Present once an enriched lead that passed verification has been routed. */
  readonly routing?: RoutingDecision;
}

export interface LeadState {
  readonly leadId: number | null;
  readonly test: boolean;
  readonly status: 'none' | 'received' | 'routed' | 'rejected' | 'unsold' | 'sold';
  readonly code: LeadOutcomeCode | null;
  readonly errors: FieldError[];
  readonly buyer: string | null;
  readonly bucket: string | null;
  readonly revenue: number;
  /** The currency its routing recorded; null until it is routed (see outcomeOf). */
  readonly currency: string | null;
}

export const initialLeadState: LeadState = {
  leadId: null,
  test: false,
  status: 'none',
  code: null,
  errors: [],
  buyer: null,
  bucket: null,
  revenue: 0,
  currency: null,
};

export class LeadAlreadyRecordedError extends Error {
  constructor(leadId: number) {
    super(`lead ${leadId} is already recorded`);
  }
}

const VERIFICATION_ERRORS: Readonly<Record<'phone' | 'email', FieldError>> = {
  phone: { field: 'mobile', code: 'verification_failed', message: 'mobile failed phone verification' },
  email: { field: 'email', code: 'verification_failed', message: 'email failed e-mail verification' },
};

// One entry per matching field; never the value, nor who sent the lead it matched.
const DUPLICATE_ERRORS: Readonly<Record<ContactKind, FieldError>> = {
  mobile: { field: 'mobile', code: 'duplicate', message: 'mobile matches a lead accepted within the duplicate window' },
  email: { field: 'email', code: 'duplicate', message: 'email matches a lead accepted within the duplicate window' },
};

const SUPPRESSED_ERRORS: Readonly<Record<ContactKind, FieldError>> = {
  mobile: { field: 'mobile', code: 'suppressed', message: 'mobile is on the suppression list' },
  email: { field: 'email', code: 'suppressed', message: 'email is on the suppression list' },
};

export function decide(command: PostLeadCommand, state: LeadState): LeadEvent[] {
  if (state.status !== 'none') throw new LeadAlreadyRecordedError(command.leadId);
  const at = command.now.toISOString();
  const lead_id = command.leadId;
  const { validation } = command;

  if (!validation.ok) {
    const { partial } = validation;
    return [
      {
        type: 'LeadReceived',
        data: { lead_id, supplier: command.supplier, key_id: command.keyId, ...partial, lead: null, received_at: at },
      },
      { type: 'LeadRejected', data: { lead_id, code: 'INVALID', errors: validation.errors, rejected_at: at } },
    ];
  }

  const lead = validation.lead;
  const received: LeadEvent = {
    type: 'LeadReceived',
    data: {
      lead_id,
      supplier: command.supplier,
      key_id: command.keyId,
      sid: lead.sid,
      s1: lead.s1,
      accident_state: lead.accident_state,
      test: lead.test,
      lead,
      ...(command.contacts ? { contacts: command.contacts } : {}),
      received_at: at,
    },
  };
  if (command.suppressed && command.suppressed.length > 0) {
    // The consumer asked to be forgotten: its personal data is not kept again, only the hashes
    // that tie the rejection to the suppression.
    const errors = command.suppressed.map((field) => SUPPRESSED_ERRORS[field]);
    return [{ ...received, data: { ...received.data, lead: null } }, { type: 'LeadRejected', data: { lead_id, code: 'SUPPRESSED', errors, rejected_at: at } }];
  }
  if (command.pingRejection) {
    const { code, errors } = command.pingRejection;
    return [received, { type: 'LeadRejected', data: { lead_id, code, errors, rejected_at: at } }];
  }
  if (command.duplicates && command.duplicates.length > 0) {
    const errors = command.duplicates.map((field) => DUPLICATE_ERRORS[field]);
    return [received, { type: 'LeadRejected', data: { lead_id, code: 'DUPLICATE', errors, rejected_at: at } }];
  }
  if (!command.enrichment) throw new Error('a valid, non-duplicate lead needs its enrichment');
  const enriched: LeadEvent = { type: 'LeadEnriched', data: { lead_id, checks: command.enrichment } };
  const routing = command.routing;
  // The post path routes only a lead whose phone and e-mail checks did not fail (the rule is
  // verificationFailed, applied once, there): a lead not routed is rejected, naming each check.
  if (!routing) {
    const errors = (['phone', 'email'] as const).filter((check) => command.enrichment![check].result === 'fail').map((check) => VERIFICATION_ERRORS[check]);
    if (errors.length === 0) throw new Error('a verified lead needs its routing decision');
    return [received, enriched, { type: 'LeadRejected', data: { lead_id, code: 'VERIFICATION_FAILED', errors, rejected_at: at } }];
  }
  const routed: LeadEvent = {
    type: 'LeadRouted',
    data: {
      lead_id,
      target: routing.target,
      price: routing.target.kind === 'buyer' ? money(routing.price) : 0,
      currency: routing.currency,
      strategy: routing.strategy,
      routing_version: routing.version,
      candidates: routing.candidates,
    },
  };
  const matched: LeadEvent[] = command.pingMatch ? [{ type: 'LeadPingMatched', data: { lead_id, ...command.pingMatch } }] : [];
  if (routing.target.kind === 'bucket') return [received, enriched, ...matched, routed];
  const sold: LeadEvent = {
    type: 'LeadSold',
    data: { lead_id, buyer: routing.target.id, revenue: money(routing.price), currency: routing.currency, sold_at: at },
  };
  return [received, enriched, ...matched, routed, sold];
}

function evolve(state: LeadState, event: LeadEvent): LeadState {
  switch (event.type) {
    case 'LeadReceived':
      return { ...state, leadId: event.data.lead_id, test: event.data.test, status: 'received' };
    case 'LeadRejected':
      return { ...state, status: 'rejected', code: event.data.code, errors: event.data.errors };
    case 'LeadEnriched':
      return state;
    case 'LeadRouted':
      return event.data.target.kind === 'bucket'
        ? { ...state, status: 'unsold', code: 'UNSOLD', bucket: event.data.target.id, currency: event.data.currency }
        : { ...state, status: 'routed', buyer: event.data.target.id, currency: event.data.currency };
    case 'LeadSold':
      return { ...state, status: 'sold', code: 'SOLD', buyer: event.data.buyer, revenue: event.data.revenue, currency: event.data.currency };
    default:
      return state;
  }
}

export const foldLead = (events: readonly LeadEvent[]): LeadState => events.reduce(evolve, initialLeadState);

/** The lead's own stream: written once, when the lead is posted. */
export const leadDecider: Decider<PostLeadCommand, LeadState, LeadEvent> = { initialState: initialLeadState, evolve, decide };

/**
 * The outcome of a recorded lead, read off its folded state. `currency`: the routing file's, which
 * the money of a lead never routed (rejected, revenue 0) is stated in: no event of such a lead
 * names a currency, and an answer always does.
 */
export function outcomeOf(state: LeadState, currency: string): LeadOutcome {
  if (state.code === null || state.leadId === null) throw new Error('the lead has no outcome yet');
  const sold = state.status === 'sold';
  return {
    lead_id: state.leadId,
    code: state.code,
    lead_status: sold ? 'sold' : state.status === 'unsold' ? 'unsold' : 'rejected',
    sold,
    revenue: sold ? money(state.revenue) : 0,
    currency: state.currency ?? currency,
    ...(state.code === 'INVALID' || state.errors.length > 0 ? { errors: state.errors } : {}),
    ...(state.test ? { test: true as const } : {}),
  };
}
