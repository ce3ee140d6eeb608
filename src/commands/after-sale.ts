import { Ajv } from 'ajv';
import type { FromSchema } from 'json-schema-to-ts';
import type { EventStore } from '../event-store/index.js';
import { type FeedbackRecorded, type LeadEvent, type LeadReturned, leadStream } from '../events/lead-events.js';
import { leadCorrelation, leadEventMetadata } from '../events/lead-metadata.js';
import { type FieldError, repeatedFields, unknownField } from '../leads/outcome.js';
import type { LoadedRoutingConfig } from '../routing/load-config.js';
import { type Decider, handleCommand } from './handler.js';

// What happens to a lead after its sale that a buyer asks for: acknowledging a pulled lead and
// sending feedback. Both are decided on the lead's own stream, folded, and appended at the
// revision read, so a lead is acknowledged once and returned at most once, however many
// requests race. Each event records the request that asked for it (its trace, the acting
// principal) and the lead it belongs to (the post's correlation id, the supplier).

/** One request by an API key, as the commands see it: who asks, under which trace, when. */
export interface AfterSaleRequest {
  /** The key's role, the name it acts for (a buyer id, an admin's name) and its id. */
  readonly principal: { readonly role: string; readonly name: string; readonly keyId: string };
  /** The request's trace id, recorded on every event it appends. */
  readonly traceId: string;
  readonly now: Date;
}

export interface SaleState {
  readonly supplier: string | null;
  /** The correlation id of the post that began the lead. */
  readonly correlationId: string | null;
  readonly buyer: string | null;
  /** What the buyer paid, in the currency of the sale, and when; null until the lead is sold. */
  readonly sold: { readonly revenue: number; readonly currency: string; readonly at: number } | null;
  readonly test: boolean;
  readonly delivered: { at: string } | null;
  /** Why the delivery will never be made (the lead's personal data was erased or expired first, or the buyer returned it). */
  readonly cancelled: 'erased' | 'expired' | 'returned' | null;
  readonly attempts: number;
  /** The webhook delivery failed for good (until it is sent again). */
  readonly failed: boolean;
  readonly returned: boolean;
  /** The feedback recorded so far: a conversion or contact sent again is answered from it. */
  readonly feedback: readonly FeedbackRecorded['data'][];
}

const NO_SALE: SaleState = { supplier: null, correlationId: null, buyer: null, sold: null, test: false, delivered: null, cancelled: null, attempts: 0, failed: false, returned: false, feedback: [] };

/** The buyer a principal acts for on this lead, or null when the lead does not exist for it. */
function actingBuyer(principal: AfterSaleRequest['principal'], sale: SaleState): string | null {
  if (sale.buyer === null || sale.test) return null;
  if (principal.role === 'admin') return sale.buyer;
  return principal.role === 'buyer' && principal.name === sale.buyer ? sale.buyer : null;
}

export class AfterSaleError extends Error {
  constructor(
    readonly code: 'NOT_FOUND' | 'FORBIDDEN' | 'INVALID' | 'RETURN_WINDOW_CLOSED' | 'ALREADY_RETURNED' | 'DELIVERY_CANCELLED' | 'NOT_PULLED' | 'BUYER_UNKNOWN',
    readonly errors?: FieldError[],
    /** What the caller is told, when the code's own message speaks of something else. */
    readonly explanation?: string,
  ) {
    super(code);
  }
}

/** POST /functions/deliveries/{id}/ack: the buyer has pulled the lead. Idempotent. */
export async function acknowledgeDelivery(store: EventStore, routing: LoadedRoutingConfig, request: AfterSaleRequest, leadId: number): Promise<{ delivered_at: string }> {
  const command: AfterSaleCommand = { type: 'AcknowledgeDelivery', leadId, request, routing };
  const { state } = await handleCommand(store, leadStream(leadId), afterSaleDecider, command, { metadata: metadataFor(request) });
  // Cancelled by this command (a return an older release left pending), or before it: refused either way.
  if (!state.delivered) throw new AfterSaleError('DELIVERY_CANCELLED');
  return { delivered_at: state.delivered.at };
}

export const FEEDBACK_SCHEMA = {
  $id: 'Feedback',
  type: 'object',
  additionalProperties: false,
  required: ['type'],
  properties: {
    type: { type: 'string', enum: ['return', 'conversion', 'contacted'] },
    // A code, as a return reason is, never free text: analysts read feedback, and a sentence could
    // carry a consumer's name or number to readers who may never see them.
    reason: {
      type: 'string',
      minLength: 1,
      maxLength: 64,
      pattern: '^[a-z][a-z0-9_]*$',
      description: "A snake_case code: for a return, one of the buyer's return_reasons; for a conversion or a contact, the buyer's own (e.g. policy_bound).",
    },
  },
} as const;

type FeedbackBody = FromSchema<typeof FEEDBACK_SCHEMA>;

const validateFeedback = new Ajv({ allErrors: true, strict: true }).compile<FeedbackBody>(FEEDBACK_SCHEMA);

/** One error per failing field, saying what the field takes; never the value sent. */
function feedbackErrors(body: unknown, repeated: readonly string[]): FieldError[] {
  const given = repeatedFields(repeated, (name) => Object.hasOwn(FEEDBACK_SCHEMA.properties, name));
  if (validateFeedback(body)) return given;
  const byField = new Map<string, FieldError>(given.map((error) => [error.field, error]));
  for (const error of validateFeedback.errors ?? []) {
    if (error.keyword === 'additionalProperties') {
      const unknown = unknownField(String((error.params as { additionalProperty: string }).additionalProperty), 'a feedback field');
      byField.set(unknown.field, unknown);
      continue;
    }
    const field = error.keyword === 'required' ? String((error.params as { missingProperty: string }).missingProperty) : error.instancePath.slice(1);
    // ajv reports a field once per rule it breaks; the first (its type before its values) is the one to fix.
    if (!byField.has(field)) byField.set(field, feedbackFieldError(field, error));
  }
  return [...byField.values()].slice(0, 20);
}

function feedbackFieldError(field: string, error: { keyword: string; params: unknown }): FieldError {
  const limit = (error.params as { limit?: number }).limit;
  switch (error.keyword) {
    case 'required':
      return { field, code: 'required', message: `${field} is required` };
    case 'type':
      return { field, code: 'wrong_type', message: `${field} must be a string` };
    case 'enum':
      return { field, code: 'invalid_value', message: `${field} must be one of ${FEEDBACK_SCHEMA.properties.type.enum.join(', ')}` };
    case 'minLength':
      return { field, code: 'too_short', message: `${field} must not be empty` };
    case 'maxLength':
      return { field, code: 'too_long', message: `${field} must be at most ${limit} characters` };
    case 'pattern':
      return { field, code: 'invalid_format', message: `${field} must be a snake_case code of lowercase letters, digits and underscores, starting with a letter` };
    default:
      return { field, code: 'invalid_value', message: `${field} is not valid` };
  }
}

/**
 * A return's reason when it is not one of the buyer's; none when the body's own rules name it
 * already, or name its type (a type given twice is not taken, so it is no return to check).
 */
function returnReasonErrors(body: Record<string, unknown>, reasons: readonly string[], invalid: readonly FieldError[]): FieldError[] {
  if (body.type !== 'return' || invalid.some((error) => error.field === 'reason' || error.field === 'type')) return [];
  if (typeof body.reason === 'string' && reasons.includes(body.reason)) return [];
  const allowed = reasons.join(', ') || '(this buyer takes no returns)';
  // A return without a reason is missing a field, as any other required one is: `required`, so a
  // client that maps codes to its form tells "fill it in" from "pick another".
  if (body.reason === undefined) return [{ field: 'reason', code: 'required', message: `reason is required for a return: one of ${allowed}` }];
  return [{ field: 'reason', code: 'invalid_value', message: `reason must be one of: ${allowed}` }];
}

const RETURNS_OF_REMOVED_BUYER =
  'The buyer is not in the routing file in force, so its return reasons and window are not known: a return cannot be recorded. ' +
  'To keep a buyer\'s returns open while it gets no new leads, an operator sets it "active": false rather than removing it.';

/** The feedback as recorded, and whether this request recorded it (false: the same was recorded before). */
export interface RecordedFeedback {
  readonly feedback: FeedbackRecorded['data'];
  readonly created: boolean;
}

/** POST /functions/leads/{id}/feedback by the buyer that bought the lead. */
export async function recordFeedback(
  store: EventStore,
  routing: LoadedRoutingConfig,
  request: AfterSaleRequest,
  leadId: number,
  body: Record<string, unknown>,
  repeated: readonly string[] = [],
): Promise<RecordedFeedback> {
  const command: AfterSaleCommand = { type: 'RecordFeedback', leadId, request, routing, body, repeated };
  const { events, state } = await handleCommand(store, leadStream(leadId), afterSaleDecider, command, { metadata: metadataFor(request) });
  const created = events.find((event) => event.type === 'FeedbackRecorded');
  if (created) return { feedback: created.data as FeedbackRecorded['data'], created: true };
  // Nothing appended: the decider found this conversion or contact recorded already.
  return { feedback: sameFeedback(state, body as FeedbackBody)!, created: false };
}

/**
 * A conversion or contact already recorded with this type and reason. A buyer's integration
 * sends feedback again when an answer is lost (a timeout, a dropped connection): the repeat is
 * the same news, and recording it twice would list it twice to the supplier and analysts.
 */
function sameFeedback(sale: SaleState, { type, reason }: FeedbackBody): FeedbackRecorded['data'] | undefined {
  if (type === 'return') return undefined;
  return sale.feedback.find((recorded) => recorded.buyer === sale.buyer && recorded.type === type && recorded.reason === (reason ?? null));
}

export type AfterSaleCommand =
  | {
      readonly type: 'AcknowledgeDelivery';
      readonly leadId: number;
      readonly request: AfterSaleRequest;
      /** The routing file in force: whether the buyer pulls its leads. */
      readonly routing: LoadedRoutingConfig;
    }
  | {
      readonly type: 'RecordFeedback';
      readonly leadId: number;
      readonly request: AfterSaleRequest;
      /** The routing file in force: the buyer's return reasons and window. */
      readonly routing: LoadedRoutingConfig;
      readonly body: Record<string, unknown>;
      /** The names the body gives more than once (see parseJsonBody). */
      readonly repeated?: readonly string[];
    };

/** The lead's stream as the after-sale commands see it. Throws AfterSaleError to refuse. */
export const afterSaleDecider: Decider<AfterSaleCommand, SaleState, LeadEvent> = {
  initialState: NO_SALE,
  evolve(state, event) {
    switch (event.type) {
      case 'LeadReceived':
        return { ...state, supplier: event.data.supplier, test: event.data.test, correlationId: leadCorrelation(event) };
      case 'LeadSold':
        return { ...state, buyer: event.data.buyer, sold: { revenue: event.data.revenue, currency: event.data.currency, at: Date.parse(event.data.sold_at) } };
      case 'LeadDeliveryAttempted':
        return { ...state, attempts: event.data.attempt };
      case 'LeadDelivered':
        return { ...state, delivered: { at: event.data.delivered_at } };
      case 'LeadDeliveryFailed':
        return { ...state, failed: state.failed || (event.data.next_attempt_at === null && event.data.cancelled !== true) };
      case 'LeadRedeliveryRequested':
        return { ...state, failed: false };
      case 'LeadReturned':
        return { ...state, returned: true };
      case 'FeedbackRecorded':
        return { ...state, feedback: [...state.feedback, event.data] };
      case 'LeadDeliveryCancelled':
        return { ...state, cancelled: event.data.reason };
      default:
        return state;
    }
  },
  decide(command, sale) {
    const { principal, now } = command.request;
    if (command.type === 'RecordFeedback' && principal.role !== 'buyer' && principal.role !== 'admin') throw new AfterSaleError('FORBIDDEN');
    const buyer = actingBuyer(principal, sale);
    if (buyer === null) throw new AfterSaleError('NOT_FOUND');
    const lead_id = command.leadId;
    if (command.type === 'AcknowledgeDelivery') {
      // A webhook buyer's lead is delivered by the worker: an ack would stop its retries and count
      // as delivered a lead the buyer may never have received.
      if (command.routing.buyers.find((b) => b.id === buyer)?.delivery.kind === 'webhook') throw new AfterSaleError('NOT_PULLED');
      if (sale.delivered) return [];
      // A cancelled delivery stays cancelled: the lead the buyer would acknowledge has no personal
      // data left, and marking it delivered would count a delivery that was never made.
      if (sale.cancelled) throw new AfterSaleError('DELIVERY_CANCELLED');
      // So is one its buyer returned before taking it. A release from before returns cancelled the
      // delivery left it pending: it is cancelled now (acknowledgeDelivery then refuses), so that it
      // leaves the buyer's pending list rather than be offered and refused at every poll.
      if (sale.returned) return [{ type: 'LeadDeliveryCancelled', data: { lead_id, buyer, bucket: null, attempts: sale.attempts, reason: 'returned', cancelled_at: now.toISOString() } }];
      return [{ type: 'LeadDelivered', data: { lead_id, buyer, via: 'pull', attempt: sale.attempts + 1, status: null, latency_ms: null, delivered_at: now.toISOString() } }];
    }
    const config = command.routing.buyers.find((b) => b.id === buyer);
    // Every failing field at once: a return reason outside the buyer's list is named beside an
    // unknown field, not only once the buyer has fixed that and sent again.
    const invalid = feedbackErrors(command.body, command.repeated ?? []);
    // A buyer taken out of the routing file took its return reasons and window with it: a return
    // cannot be judged, and is refused for that, not as a reason the buyer does not take.
    if (!config && invalid.length === 0 && command.body.type === 'return') throw new AfterSaleError('BUYER_UNKNOWN', undefined, RETURNS_OF_REMOVED_BUYER);
    const errors = [...invalid, ...returnReasonErrors(command.body, config?.return_reasons ?? [], invalid)];
    if (errors.length > 0) throw new AfterSaleError('INVALID', errors);
    const { type, reason } = command.body as FeedbackBody;
    if (sameFeedback(sale, { type, reason })) return [];
    const recorded: FeedbackRecorded['data'] = { lead_id, buyer, type, reason: reason ?? null, recorded_at: now.toISOString() };
    const events: LeadEvent[] = [{ type: 'FeedbackRecorded', data: recorded }];
    if (type === 'return' && reason !== undefined) {
      if (sale.returned) throw new AfterSaleError('ALREADY_RETURNED');
      const windowMs = (config?.return_window_days ?? 7) * 86_400_000;
      if (sale.sold === null || now.getTime() - sale.sold.at > windowMs) throw new AfterSaleError('RETURN_WINDOW_CLOSED');
      const returned: LeadReturned['data'] = { lead_id, buyer, revenue: sale.sold.revenue, currency: sale.sold.currency, reason, returned_at: recorded.recorded_at };
      events.push({ type: 'LeadReturned', data: returned });
      // Not delivered yet (a webhook retry due, a pulled lead not acknowledged): the buyer that sent
      // it back does not want it, so it is never sent. An attempt in flight may still land.
      if (!sale.delivered && sale.cancelled === null && !sale.failed) {
        events.push({ type: 'LeadDeliveryCancelled', data: { lead_id, buyer, bucket: null, attempts: sale.attempts, reason: 'returned', cancelled_at: recorded.recorded_at } });
      }
    }
    return events;
  },
};

/** The request behind the events and the lead they belong to, on every event appended. */
function metadataFor({ principal, traceId, now }: AfterSaleRequest) {
  return (sale: SaleState) =>
    leadEventMetadata(
      {
        traceId,
        correlationId: sale.correlationId,
        causationId: `request:${traceId}`,
        supplierId: sale.supplier,
        principal: { role: principal.role, id: principal.name, key_id: principal.keyId },
      },
      now,
    );
}
