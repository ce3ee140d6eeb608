import { Ajv } from 'ajv';
import type { FromSchema } from 'json-schema-to-ts';
import { type Decider, handleCommand, readFolded } from '../commands/handler.js';
import type { EventStore } from '../event-store/port.js';
import { type ErasureNoticeRedeliveryRequested, type LeadEvent, type LeadRedeliveryRequested, leadStream } from '../events/lead-events.js';
import { leadEventMetadata } from '../events/lead-metadata.js';
import { type FieldError, oncePerField, repeatedFields, unknownFields } from '../leads/outcome.js';
import type { Filter, ReadModelStore } from '../read-models/port.js';
import { type DeliveryState, type RedeliveryRefusal, RedeliveryRefusedError, deliveryDecider } from './attempt.js';
import { type NoticeState, noticeDecider } from './erasure-notice.js';

// Sending a delivery that failed for good once more, when the buyer has fixed its side: after it
// rotated the secret it checks signatures with (its 401s are final), or came back from an outage
// longer than its `max_attempts` last. Decided on the lead's own stream (attempt.ts says which
// leads may be sent again), so of two requests at once one re-opens the delivery and the other
// finds it pending. The webhook worker then sends it as any due lead, with the same
// Idempotency-Key, so a buyer that took the lead after all drops the copy.
//
// Once the lead's personal data is gone (erased or expired) there is no delivery left to make, but
// the buyer that received the lead may not have taken its `lead.erased` notice: the same request
// then sends that notice again, if it failed for good (erasure-notice.ts says which may be). One
// request for both, because an admin after a buyer's outage wants whatever the buyer missed sent.

/** Who asks, under which trace, when, and why. */
export interface RedeliveryOrigin {
  /** The key's role and the name it acts for, and its id (recorded in the metadata, never the key); the command line has no key. */
  readonly principal: { readonly role: string; readonly name: string; readonly keyId: string | null };
  readonly traceId: string;
  readonly now: Date;
  readonly reason: string | null;
  /** The buyers of the routing file in force (see RedeliveryRequest.buyerKnown). */
  readonly buyerKnown: (buyer: string) => boolean;
}

export const REDELIVERY_SCHEMA = {
  $id: 'Redelivery',
  type: 'object',
  additionalProperties: false,
  properties: {
    // A code, as a return reason is, never free text: whoever may read the lead's events reads it,
    // and a sentence could carry a consumer's name or number to them.
    reason: {
      type: 'string',
      minLength: 1,
      maxLength: 64,
      pattern: '^[a-z][a-z0-9_]*$',
      description: 'Why the lead is sent again, as a snake_case code (e.g. secret_rotated, buyer_outage).',
    },
  },
} as const;

type RedeliveryBody = FromSchema<typeof REDELIVERY_SCHEMA>;

const validateRedelivery = new Ajv({ allErrors: true, strict: true }).compile<RedeliveryBody>(REDELIVERY_SCHEMA);

/** Every failing member of a redelivery's body, each named; never the value sent. */
export function redeliveryErrors(body: Record<string, unknown>, repeated: readonly string[] = []): FieldError[] {
  const given = repeatedFields(repeated, (name) => Object.hasOwn(REDELIVERY_SCHEMA.properties, name));
  if (validateRedelivery(body)) return given;
  const errors = validateRedelivery.errors ?? [];
  const unknown = errors.filter((error) => error.keyword === 'additionalProperties').map((error) => String((error.params as { additionalProperty: string }).additionalProperty));
  const reason = errors.some((error) => error.instancePath === '/reason')
    ? [{ field: 'reason', code: 'invalid_format', message: 'reason must be a snake_case code of 1–64 lowercase letters, digits and underscores, starting with a letter' }]
    : [];
  return oncePerField([...given, ...unknownFields(unknown.slice(0, 20), 'a field of a redelivery: give "reason" only'), ...reason]);
}

const redeliveryCommand = ({ principal, now, reason, buyerKnown }: RedeliveryOrigin) =>
  ({ type: 'RequestRedelivery' as const, request: { requestedBy: { role: principal.role, name: principal.name }, reason, now, buyerKnown } });

/** What a redelivery re-opened: the lead's delivery, or its `lead.erased` notice. */
export type Reopened =
  | { readonly type: 'LeadRedeliveryRequested'; readonly data: LeadRedeliveryRequested['data'] }
  | { readonly type: 'ErasureNoticeRedeliveryRequested'; readonly data: ErasureNoticeRedeliveryRequested['data'] };

interface SendAgainState {
  readonly delivery: DeliveryState;
  readonly notice: NoticeState;
}

/**
 * The lead's stream as a redelivery sees it, both folds at once so that one append, at the revision
 * read, decides it. A sold lead with a `lead.erased` notice (its personal data gone, its buyer sent
 * it by webhook) has its notice decided; any other lead its delivery, as before: an erased lead
 * with no notice is refused DELIVERY_CANCELLED, a returned one ALREADY_RETURNED.
 */
export const redeliveryDecider: Decider<ReturnType<typeof redeliveryCommand>, SendAgainState, LeadEvent> = {
  initialState: { delivery: deliveryDecider.initialState, notice: noticeDecider.initialState },
  evolve: (state, event) => ({ delivery: deliveryDecider.evolve(state.delivery, event), notice: noticeDecider.evolve(state.notice, event) }),
  decide(command, { delivery, notice }) {
    const sold = delivery.sale !== null && delivery.received !== null && !delivery.received.test;
    if (sold && notice.buyer !== null) return noticeDecider.decide({ type: 'RequestNoticeRedelivery', request: command.request }, notice);
    return deliveryDecider.decide(command, delivery);
  },
};

/** Re-opens the lead's failed delivery, or its failed `lead.erased` notice; throws RedeliveryRefusedError when neither may be. */
export async function requestRedelivery(store: EventStore, leadId: number, origin: RedeliveryOrigin): Promise<Reopened> {
  const { principal, traceId, now } = origin;
  const command = redeliveryCommand(origin);
  const metadata = ({ delivery }: SendAgainState) =>
    leadEventMetadata(
      {
        traceId,
        correlationId: delivery.traceId,
        causationId: `request:${traceId}`,
        supplierId: delivery.received?.supplier ?? null,
        ...(principal.keyId === null ? {} : { principal: { role: principal.role, id: principal.name, key_id: principal.keyId } }),
      },
      now,
    );
  const { events } = await handleCommand(store, leadStream(leadId), redeliveryDecider, command, { metadata });
  return events[0] as Reopened;
}

/** What a redelivery of many leads came to. */
export interface RedeliverySweep {
  /** The leads whose delivery was re-opened (or, on a dry run, would be). */
  readonly redelivered: number[];
  /** The leads whose `lead.erased` notice was re-opened (or would be). */
  readonly notices: number[];
  /** Leads the read model showed failed that were not re-opened, with why (sent again meanwhile, say) and what was refused. */
  readonly refused: Array<{ readonly lead_id: number; readonly code: RedeliveryRefusal; readonly subject: 'delivery' | 'notice' }>;
}

const PAGE = 500;

/** The ids of the deliveries rows `filter` meets, oldest first, a page at a time. */
async function rowIds(readModels: ReadModelStore, collection: string, filter: Filter): Promise<number[]> {
  const ids: number[] = [];
  let after: { value: string; id: string } | undefined;
  for (;;) {
    const rows = await readModels.find(collection, { filter, sort: { field: 'created_at', direction: 'asc' }, ...(after ? { after } : {}), limit: PAGE });
    for (const row of rows) if (typeof row.lead_id === 'number') ids.push(row.lead_id);
    const last = rows.at(-1);
    if (rows.length < PAGE || typeof last?.created_at !== 'string') return ids;
    after = { value: last.created_at, id: last._id };
  }
}

/**
 * Every lead of `buyer` whose delivery failed for good at or after `since` (its last attempt's
 * time), read from the deliveries read model, is sent again: the common case after a buyer's
 * outage. So is every `lead.erased` notice to that buyer that failed for good, whenever it did:
 * `since` does not bound them. A row keeps no time of its notice's failure (its last attempt is
 * the delivery's), and a buyer that missed a notice holds the erased consumer's data however long
 * ago that was; a buyer that took the notice after all drops the copy by its Idempotency-Key.
 * Each lead is decided on its own stream, so a lead the read model shows failed but that was sent
 * again meanwhile is refused, not re-opened twice.
 */
export async function redeliverFailed(
  deps: { readonly store: EventStore; readonly readModels: ReadModelStore; readonly deliveries: string },
  selection: { readonly buyer: string; readonly since: string; readonly dryRun: boolean },
  origin: RedeliveryOrigin,
): Promise<RedeliverySweep> {
  const failed = await rowIds(deps.readModels, deps.deliveries, { buyer: selection.buyer, status: 'failed', last_attempt_at: { $gte: selection.since } });
  const notices = await rowIds(deps.readModels, deps.deliveries, { buyer: selection.buyer, notice: 'failed' });
  // A lead whose delivery failed and was erased since can be in both: it is decided once.
  const ids = [...new Set([...failed, ...notices])];
  const sweep: RedeliverySweep = { redelivered: [], notices: [], refused: [] };
  for (const leadId of ids) {
    try {
      // A dry run decides each lead as the run would, on its own stream, and records nothing: the
      // read model's failed rows include leads erased or returned since, which the run decides by
      // their notice or refuses.
      const [reopened] = selection.dryRun
        ? await redeliveryDecider.decide(redeliveryCommand(origin), (await readFolded(deps.store, leadStream(leadId), redeliveryDecider)).state)
        : [await requestRedelivery(deps.store, leadId, origin)];
      (reopened?.type === 'ErasureNoticeRedeliveryRequested' ? sweep.notices : sweep.redelivered).push(leadId);
    } catch (error) {
      if (!(error instanceof RedeliveryRefusedError)) throw error;
      sweep.refused.push({ lead_id: leadId, code: error.code, subject: error.subject });
    }
  }
  return sweep;
}
