import { Ajv } from 'ajv';
import type { FromSchema } from 'json-schema-to-ts';
import { handleCommand, readFolded } from '../commands/handler.js';
import type { EventStore } from '../event-store/port.js';
import { type LeadRedeliveryRequested, leadStream } from '../events/lead-events.js';
import { leadEventMetadata } from '../events/lead-metadata.js';
import { type FieldError, oncePerField, repeatedFields, unknownFields } from '../leads/outcome.js';
import type { ReadModelStore } from '../read-models/port.js';
import { type DeliveryState, type RedeliveryRefusal, RedeliveryRefusedError, deliveryDecider } from './attempt.js';

// Sending a delivery that failed for good once more, when the buyer has fixed its side: after it
// rotated the secret it checks signatures with (its 401s are final), or came back from an outage
// longer than its `max_attempts` last. Decided on the lead's own stream (attempt.ts says which
// leads may be sent again), so of two requests at once one re-opens the delivery and the other
// finds it pending. The webhook worker then sends it as any due lead, with the same
// Idempotency-Key, so a buyer that took the lead after all drops the copy.

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

/** Re-opens the lead's failed delivery; throws RedeliveryRefusedError when it may not be. */
export async function requestRedelivery(store: EventStore, leadId: number, origin: RedeliveryOrigin): Promise<LeadRedeliveryRequested['data']> {
  const { principal, traceId, now } = origin;
  const command = redeliveryCommand(origin);
  const metadata = (state: DeliveryState) =>
    leadEventMetadata(
      {
        traceId,
        correlationId: state.traceId,
        causationId: `request:${traceId}`,
        supplierId: state.received?.supplier ?? null,
        ...(principal.keyId === null ? {} : { principal: { role: principal.role, id: principal.name, key_id: principal.keyId } }),
      },
      now,
    );
  const { events } = await handleCommand(store, leadStream(leadId), deliveryDecider, command, { metadata });
  return events[0]!.data as LeadRedeliveryRequested['data'];
}

/** What a redelivery of many leads came to. */
export interface RedeliverySweep {
  /** The leads re-opened (or, on a dry run, that would be). */
  readonly redelivered: number[];
  /** Leads the read model showed failed that were not re-opened, with why: sent again meanwhile, say. */
  readonly refused: Array<{ readonly lead_id: number; readonly code: RedeliveryRefusal }>;
}

const PAGE = 500;

/**
 * Every lead of `buyer` whose delivery failed for good at or after `since` (its last attempt's
 * time), read from the deliveries read model, is sent again: the common case after a buyer's
 * outage. Each lead is decided on its own stream, so a lead the read model shows failed but that
 * was sent again meanwhile is refused, not re-opened twice.
 */
export async function redeliverFailed(
  deps: { readonly store: EventStore; readonly readModels: ReadModelStore; readonly deliveries: string },
  selection: { readonly buyer: string; readonly since: string; readonly dryRun: boolean },
  origin: RedeliveryOrigin,
): Promise<RedeliverySweep> {
  const ids: number[] = [];
  let after: { value: string; id: string } | undefined;
  for (;;) {
    const rows = await deps.readModels.find(deps.deliveries, {
      filter: { buyer: selection.buyer, status: 'failed', last_attempt_at: { $gte: selection.since } },
      sort: { field: 'created_at', direction: 'asc' },
      ...(after ? { after } : {}),
      limit: PAGE,
    });
    for (const row of rows) if (typeof row.lead_id === 'number') ids.push(row.lead_id);
    const last = rows.at(-1);
    if (rows.length < PAGE || typeof last?.created_at !== 'string') break;
    after = { value: last.created_at, id: last._id };
  }
  const sweep: RedeliverySweep = { redelivered: [], refused: [] };
  for (const leadId of ids) {
    try {
      // A dry run decides each lead as the run would, on its own stream, and records nothing: the
      // read model's failed rows include leads erased or returned since, which the run refuses.
      if (selection.dryRun) deliveryDecider.decide(redeliveryCommand(origin), (await readFolded(deps.store, leadStream(leadId), deliveryDecider)).state);
      else await requestRedelivery(deps.store, leadId, origin);
      sweep.redelivered.push(leadId);
    } catch (error) {
      if (!(error instanceof RedeliveryRefusedError)) throw error;
      sweep.refused.push({ lead_id: leadId, code: error.code });
    }
  }
  return sweep;
}
