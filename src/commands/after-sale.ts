import { Ajv } from 'ajv';
import type { FromSchema } from 'json-schema-to-ts';
import { type EventStore, type RecordedEvent, WrongExpectedRevisionError } from '../event-store/index.js';
import { type FeedbackRecorded, type LeadEvent, type LeadReturned, leadStream } from '../events/lead-events.js';
import { leadCorrelation, leadEventMetadata } from '../events/lead-metadata.js';
import type { FieldError } from '../http/envelope.js';
import type { LoadedRoutingConfig } from '../routing/load-config.js';
import { MAX_RACES } from './streams.js';

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
  readonly revision: number;
  readonly supplier: string | null;
  /** The correlation id of the post that began the lead. */
  readonly correlationId: string | null;
  readonly buyer: string | null;
  readonly revenue: number;
  readonly currency: string;
  readonly soldAt: number | null;
  readonly test: boolean;
  readonly delivered: { at: string } | null;
  readonly attempts: number;
  readonly returned: boolean;
}

export function foldSale(events: readonly RecordedEvent[]): SaleState {
  let state: SaleState = { revision: -1, supplier: null, correlationId: leadCorrelation(events[0]), buyer: null, revenue: 0, currency: 'USD', soldAt: null, test: false, delivered: null, attempts: 0, returned: false };
  for (const recorded of events) {
    const event = recorded as unknown as LeadEvent;
    state = { ...state, revision: recorded.revision };
    if (event.type === 'LeadReceived') state = { ...state, supplier: event.data.supplier, test: event.data.test };
    if (event.type === 'LeadSold') state = { ...state, buyer: event.data.buyer, revenue: event.data.revenue, currency: event.data.currency, soldAt: Date.parse(event.data.sold_at) };
    if (event.type === 'LeadDeliveryAttempted') state = { ...state, attempts: event.data.attempt };
    if (event.type === 'LeadDelivered') state = { ...state, delivered: { at: event.data.delivered_at } };
    if (event.type === 'LeadReturned') state = { ...state, returned: true };
  }
  return state;
}

/** The buyer a principal acts for on this lead, or null when the lead does not exist for it. */
function actingBuyer(principal: AfterSaleRequest['principal'], sale: SaleState): string | null {
  if (sale.buyer === null || sale.test) return null;
  if (principal.role === 'admin') return sale.buyer;
  return principal.role === 'buyer' && principal.name === sale.buyer ? sale.buyer : null;
}

export class AfterSaleError extends Error {
  constructor(
    readonly code: 'NOT_FOUND' | 'FORBIDDEN' | 'INVALID' | 'RETURN_WINDOW_CLOSED' | 'ALREADY_RETURNED',
    readonly errors?: FieldError[],
  ) {
    super(code);
  }
}

async function onLead<T>(store: EventStore, request: AfterSaleRequest, leadId: number, decide: (sale: SaleState) => { events: LeadEvent[]; result: T }): Promise<T> {
  for (let race = 0; race < MAX_RACES; race++) {
    const events = await store.readStream(leadStream(leadId));
    const sale = foldSale(events);
    const { events: decided, result } = decide(sale);
    if (decided.length === 0) return result;
    const { principal, traceId, now } = request;
    const metadata = leadEventMetadata(
      {
        traceId,
        correlationId: sale.correlationId,
        causationId: `request:${traceId}`,
        supplierId: sale.supplier,
        principal: { role: principal.role, id: principal.name, key_id: principal.keyId },
      },
      now,
    );
    try {
      await store.append(leadStream(leadId), decided.map((event) => ({ type: event.type, data: event.data, metadata })), { expectedRevision: sale.revision });
      return result;
    } catch (error) {
      if (!(error instanceof WrongExpectedRevisionError)) throw error;
    }
  }
  throw new Error(`lead ${leadId} changed under ${MAX_RACES} attempts`);
}

/** POST /functions/deliveries/{id}/ack: the buyer has pulled the lead. Idempotent. */
export function acknowledgeDelivery(store: EventStore, request: AfterSaleRequest, leadId: number): Promise<{ delivered_at: string }> {
  return onLead(store, request, leadId, (sale) => {
    const buyer = actingBuyer(request.principal, sale);
    if (buyer === null) throw new AfterSaleError('NOT_FOUND');
    if (sale.delivered) return { events: [], result: { delivered_at: sale.delivered.at } };
    const delivered_at = request.now.toISOString();
    const event: LeadEvent = {
      type: 'LeadDelivered',
      data: { lead_id: leadId, buyer, via: 'pull', attempt: sale.attempts + 1, status: null, latency_ms: null, delivered_at },
    };
    return { events: [event], result: { delivered_at } };
  });
}

export const FEEDBACK_SCHEMA = {
  $id: 'Feedback',
  type: 'object',
  additionalProperties: false,
  required: ['type'],
  properties: {
    type: { type: 'string', enum: ['return', 'conversion', 'contacted'] },
    reason: { type: 'string', minLength: 1, maxLength: 64, description: "For a return: one of the buyer's return_reasons." },
  },
} as const;

export type FeedbackBody = FromSchema<typeof FEEDBACK_SCHEMA>;

const validateFeedback = new Ajv({ allErrors: true, strict: true }).compile<FeedbackBody>(FEEDBACK_SCHEMA);

function feedbackErrors(body: unknown): FieldError[] {
  if (validateFeedback(body)) return [];
  return (validateFeedback.errors ?? []).map((error) => {
    const field =
      error.keyword === 'required'
        ? String((error.params as { missingProperty: string }).missingProperty)
        : error.keyword === 'additionalProperties'
          ? String((error.params as { additionalProperty: string }).additionalProperty).slice(0, 64)
          : error.instancePath.slice(1);
    const code = error.keyword === 'required' ? 'required' : error.keyword === 'additionalProperties' ? 'unknown_field' : 'invalid_value';
    return { field, code, message: `${field} ${code === 'required' ? 'is required' : code === 'unknown_field' ? 'is not a feedback field' : 'is not valid'}` };
  });
}

/** POST /functions/leads/{id}/feedback by the buyer that bought the lead. */
export function recordFeedback(
  store: EventStore,
  routing: LoadedRoutingConfig,
  request: AfterSaleRequest,
  leadId: number,
  body: Record<string, unknown>,
): Promise<FeedbackRecorded['data']> {
  const { principal, now } = request;
  if (principal.role !== 'buyer' && principal.role !== 'admin') return Promise.reject(new AfterSaleError('FORBIDDEN'));
  return onLead(store, request, leadId, (sale) => {
    const buyer = actingBuyer(principal, sale);
    if (buyer === null) throw new AfterSaleError('NOT_FOUND');
    const errors = feedbackErrors(body);
    if (errors.length > 0) throw new AfterSaleError('INVALID', errors);
    const { type, reason } = body as FeedbackBody;
    const recorded: FeedbackRecorded['data'] = { lead_id: leadId, buyer, type, reason: reason ?? null, recorded_at: now.toISOString() };
    const events: LeadEvent[] = [{ type: 'FeedbackRecorded', data: recorded }];
    if (type === 'return') {
      const config = routing.buyers.find((b) => b.id === buyer);
      const reasons = config?.return_reasons ?? [];
      if (reason === undefined || !reasons.includes(reason)) {
        throw new AfterSaleError('INVALID', [{ field: 'reason', code: 'invalid_value', message: `reason must be one of: ${reasons.join(', ') || '(this buyer takes no returns)'}` }]);
      }
      if (sale.returned) throw new AfterSaleError('ALREADY_RETURNED');
      const windowMs = (config?.return_window_days ?? 7) * 86_400_000;
      if (sale.soldAt === null || now.getTime() - sale.soldAt > windowMs) throw new AfterSaleError('RETURN_WINDOW_CLOSED');
      const returned: LeadReturned['data'] = { lead_id: leadId, buyer, revenue: sale.revenue, currency: sale.currency, reason, returned_at: recorded.recorded_at };
      events.push({ type: 'LeadReturned', data: returned });
    }
    return { events, result: recorded };
  });
}
