// Shapes of the read-back answers for the OpenAPI document. Enumerations come
// from the code that checks or builds them (delivery statuses, report dimensions and metrics,
// feedback types); rows stay open (additionalProperties) because a projection may add a field
// before the docs name it. The docs tests validate real answers against these shapes.

import { FEEDBACK_SCHEMA } from '../commands/after-sale.js';
import { DELIVERY_KINDS } from '../read-models/delivery-kind.js';
import { DELIVERY_STATUSES } from '../read-models/read-back.js';
import { GROUP_BY, METRICS } from '../read-models/report.js';
import { READINESS_CHECKS } from '../ops/readiness.js';
import { SERVICE_ROLES } from '../config.js';
import { PROJECTION_LEASES } from '../roles/projector-leases.js';
import { CONSUMER_EMAIL } from './posted.js';

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const nullable = (type: string, extra: Record<string, unknown> = {}) => ({ type: [type, 'null'], ...extra });
const CHECK_RESULT = { type: ['string', 'null'], enum: ['pass', 'fail', 'unknown', null] };

export const POSITION_SCHEMA = {
  type: 'object',
  required: ['commit', 'prepare'],
  properties: { commit: { type: 'integer' }, prepare: { type: 'integer' } },
  description: 'A place in the event log ($all). A read-back answer reflects every event up to here.',
};

/** {ok, trace_id, code: OK, message, position} and what the route adds. */
export function readBackBody(properties: Record<string, unknown>, required: string[]): Record<string, unknown> {
  return {
    type: 'object',
    required: ['ok', 'trace_id', 'code', 'message', 'position', ...required],
    properties: {
      ok: { const: true },
      trace_id: { type: 'string', pattern: '^[0-9a-f]{32}$' },
      code: { const: 'OK' },
      message: { type: 'string' },
      position: ref('Position'),
      ...properties,
    },
  };
}

export const listBody = (row: string, extra: Record<string, unknown> = {}) =>
  readBackBody({ items: { type: 'array', items: ref(row) }, next_cursor: { type: ['string', 'null'], description: 'Pass back as cursor for the next page; null on the last.' }, ...extra }, ['items', 'next_cursor']);

/** The consumer's fields as a lead view, a delivery row and a webhook delivery give them, normalised as the post was. */
export const CONSUMER_CONTACT_FIELDS = {
  first_name: { type: 'string' },
  last_name: { type: 'string' },
  email: { type: 'string', description: 'Trimmed, lower-cased.' },
  mobile: { type: 'string', pattern: '^\\+[1-9][0-9]{6,14}$', description: 'E.164: `+12135550143`.' },
  mobile_national: { type: 'string', pattern: '^[0-9]+$', description: 'The national number, digits only: `2135550143`.' },
  zip: { type: 'string', pattern: '^[0-9]{5}$' },
  zip4: { type: ['string', 'null'], pattern: '^[0-9]{4}$', description: 'The ZIP+4 extension; null when the supplier sent a 5-digit ZIP.' },
  accident_state: { type: 'string', pattern: '^[A-Z]{2}$', description: 'USPS code, upper case.' },
} as const;

/**
 * The consumer fields of a lead as a lead view and a delivery row carry them: what a pull buyer
 * takes its lead from, as a webhook buyer takes it from the delivery's `lead`, with the
 * certificate id and the supplier's fields besides. Once erased, only the fields that are not
 * personal are left, with `erased: true`.
 */
export const CONSUMER_FIELDS_SCHEMA = {
  type: 'object',
  description:
    "The lead's consumer fields, normalised as the post was: for the supplier that sent it, the buyer that bought it, and admin. " +
    'Once its personal data is erased or expired, the name, e-mail, mobile and certificate fields are gone and `erased` is true.',
  properties: {
    ...CONSUMER_CONTACT_FIELDS,
    certificate_url: { type: 'string', description: 'The consent certificate (TrustedForm) URL as posted.' },
    certificate_id: { type: 'string', pattern: '^[0-9a-f]{40}$', description: "The certificate's 40-hex id, taken from its URL, lower case." },
    sid: { type: 'string', description: "The supplier's source id." },
    s1: { type: ['string', 'null'], description: "The supplier's sub-id (a click id); null when it sent none." },
    test: { type: 'boolean', description: 'A test lead: never delivered.' },
    erased: { const: true, description: "Present once the lead's personal data was erased or expired." },
  },
};

const consumerFields = (description: string) => ({ anyOf: [ref('ConsumerFields'), { type: 'null' }], description });

export const LEAD_VIEW_SCHEMA = {
  type: 'object',
  required: ['lead_id', 'supplier', 'lead_status', 'code', 'sold', 'revenue', 'currency', 'buyer', 'bucket', 'test', 'received_at', 'lead'],
  properties: {
    lead_id: { type: 'integer' },
    supplier: { type: 'string' },
    sid: nullable('string'),
    s1: nullable('string'),
    lead_status: { type: 'string', enum: ['received', 'sold', 'unsold', 'rejected'] },
    code: nullable('string', { description: 'The outcome code of the post.' }),
    sold: { type: 'boolean' },
    revenue: { type: 'number' },
    currency: {
      type: 'string',
      pattern: '^[A-Z]{3}$',
      description: "The currency its routing recorded; for a lead never routed (rejected, revenue 0), the routing file's in force.",
    },
    buyer: nullable('string'),
    bucket: nullable('string'),
    test: { type: 'boolean' },
    received_at: { type: 'string', format: 'date-time' },
    errors: { type: ['array', 'null'], items: ref('FieldError') },
    enrichment: {
      type: ['object', 'null'],
      properties: { phone: CHECK_RESULT, email: CHECK_RESULT, consent: CHECK_RESULT },
      description: 'What each verification found.',
    },
    delivery: {
      type: ['object', 'null'],
      properties: { status: { type: 'string', enum: DELIVERY_STATUSES }, attempts: { type: 'integer' } },
      description: 'null for a rejected or test lead.',
    },
    feedback: { type: 'array', items: ref('LeadFeedback'), description: 'What the buyer said about the lead, oldest first.' },
    ping: {
      type: ['object', 'null'],
      properties: {
        ping_id: { type: 'string' },
        buyer: { ...nullable('string'), description: 'The buyer whose bid it sold at; null: no bid could take it and it was routed as a plain post.' },
        bid: nullable('number'),
        expires_at: { ...nullable('string'), description: 'GET /functions/leads/{lead_id} only.' },
        bids: { type: 'array', items: { type: 'object' }, description: 'GET /functions/leads/{lead_id} only: what each buyer did with the ping (bid, no_bid, ineligible, below_min_bid, above_max_bid, invalid, timeout, error) with its amount, latency_ms and detail (ineligible: why it was not asked, e.g. state_not_allowed, cap_reached, or bidder_resting for a webhook bidder passed by after failing pings in a row); a buyer sees only its own.' },
      },
      description: 'The ping the lead was posted with (ping_id); null when it was posted without one.',
    },
    personal_data_erased: {
      type: 'boolean',
      description: "The lead's personal data was erased on the consumer's request, or expired after the retention period: every reader of the lead may know it; none may read the data.",
    },
    lead: consumerFields(
      'The normalised consumer fields; only for the supplier that sent it, the buyer that bought it, and admin (null for others). Once the lead\'s personal data was erased, it has no name, e-mail, mobile or certificate, and `erased: true`.',
    ),
  },
};

export const LEAD_EVENT_SCHEMA = {
  type: 'object',
  required: ['revision', 'type', 'occurred_at', 'trace_id', 'data'],
  properties: {
    revision: { type: 'integer', minimum: 0, description: 'Place in the lead\'s stream, from 0.' },
    type: {
      type: 'string',
      examples: ['LeadReceived', 'LeadRejected', 'LeadEnriched', 'LeadRouted', 'LeadSold', 'LeadPingMatched', 'LeadDeliveryAttempted', 'LeadDelivered', 'LeadDeliveryFailed', 'LeadRedeliveryRequested', 'FeedbackRecorded', 'LeadReturned'],
    },
    occurred_at: { type: 'string', format: 'date-time' },
    trace_id: { ...nullable('string'), description: 'The trace of the request that appended it (X-Trace-Id of that answer).' },
    data: {
      type: 'object',
      description:
        'The event as recorded. LeadRouted has `candidates`: each buyer with price, eligible and reason. ' +
        'In LeadReceived, `lead` holds the consumer fields only for those who may see them; others get accident_state, sid, s1, test.',
    },
  },
};

export const DELIVERY_ROW_SCHEMA = {
  type: 'object',
  required: ['lead_id', 'buyer', 'bucket', 'delivery_kind', 'status', 'attempts'],
  properties: {
    lead_id: { type: 'integer' },
    buyer: nullable('string'),
    bucket: nullable('string'),
    delivery_kind: {
      type: ['string', 'null'],
      enum: [...DELIVERY_KINDS, null],
      description:
        'How the lead reaches the buyer, in the routing file\'s words (a buyer\'s `delivery.kind`): `webhook`, the service POSTs it to the buyer\'s endpoint; ' +
        '`pull`, the buyer lists it and acknowledges it (POST /functions/deliveries/{lead_id}/ack). ' +
        'A delivered row says how it was delivered, as recorded; any other row, the buyer\'s delivery in the routing file in force, which the service follows ' +
        '(a buyer the file no longer names: pull). null for a bucket\'s row: a lead left in a bucket is sent to no one.',
    },
    status: { type: 'string', enum: DELIVERY_STATUSES },
    attempts: { type: 'integer' },
    last_attempt_at: nullable('string', { format: 'date-time' }),
    last_status_code: nullable('integer'),
    last_error: nullable('string', {
      pattern: '^(http_[1-5]xx|timeout|connection_error|attempt_lost)$',
      description:
        'Why the latest failed webhook attempt failed: `http_4xx`, `http_5xx` (any status but 2xx, by its hundred; the status is in last_status_code), ' +
        '`timeout`, `connection_error`, or `attempt_lost` (an attempt that recorded no outcome in time). ' +
        'null until an attempt fails, and again once the lead is delivered; a cancelled delivery keeps the last one. Only a webhook buyer\'s row is ever set: a pull buyer\'s and a bucket\'s stay null.',
    }),
    delivered_at: nullable('string', { format: 'date-time' }),
    next_attempt_at: nullable('string', {
      format: 'date-time',
      description:
        'When the webhook worker is to make the next attempt: created_at, the moment of the sale (due at once), when the lead is sold, ' +
        'and after a failed attempt that will be retried, when the retry is due (the buyer\'s Retry-After, else the backoff); unchanged while an attempt is under way. ' +
        'null for a bucket\'s row, and once the delivery is delivered, cancelled, or failed for good (status `failed`). ' +
        'A pull buyer\'s pending row keeps its created_at: no worker sends it, the buyer lists and acknowledges it.',
    }),
    created_at: { type: 'string', format: 'date-time' },
    lead: consumerFields('The consumer fields, for the buyer it was sold to (and admin; null for others): what a pull buyer takes its lead from. `{…, erased: true}` without the personal ones once erased.'),
    erased: { const: true, description: "Present once the lead's personal data was erased or expired." },
    notice: { type: 'string', enum: ['pending', 'sent', 'failed'], description: 'A webhook buyer that received an erased lead: its `lead.erased` notice.' },
    notice_next_at: nullable('string', { format: 'date-time', description: 'With `notice`: when the notice is next due; null once it is sent or given up.' }),
  },
};

/** One piece of feedback inside its lead's view: the lead is the view's own, so no lead_id. */
export const LEAD_FEEDBACK_SCHEMA = {
  type: 'object',
  required: ['buyer', 'type', 'recorded_at'],
  properties: {
    buyer: { type: 'string' },
    type: { type: 'string', enum: FEEDBACK_SCHEMA.properties.type.enum },
    reason: nullable('string'),
    recorded_at: { type: 'string', format: 'date-time' },
  },
};

/** One piece of feedback on its own (the feedback list, a feedback post's answer): the same, with its lead_id. */
export const FEEDBACK_ROW_SCHEMA = {
  type: 'object',
  required: ['lead_id', ...LEAD_FEEDBACK_SCHEMA.required],
  properties: { lead_id: { type: 'integer' }, ...LEAD_FEEDBACK_SCHEMA.properties },
};

export const REPORT_ROW_SCHEMA = {
  type: 'object',
  description: 'One field per group_by dimension, then the metrics. Money has 2 decimals; rates are 0–1.',
  properties: {
    ...Object.fromEntries(GROUP_BY.map((dimension) => [dimension, nullable('string')])),
    ...Object.fromEntries(METRICS.map((metric) => [metric, { type: 'number' }])),
  },
};

const CHECK = {
  type: 'object',
  required: ['ok', 'detail'],
  properties: { ok: { type: 'boolean' }, detail: { type: 'string' } },
};

export const READINESS_CHECKS_SCHEMA = {
  type: 'object',
  required: [...READINESS_CHECKS],
  properties: {
    ...Object.fromEntries(READINESS_CHECKS.map((name) => [name, CHECK])),
    projections: {
      ...CHECK,
      properties: {
        ...CHECK.properties,
        items: {
          type: 'array',
          items: {
            type: 'object',
            required: ['projection', 'caught_up', 'events_behind', 'lag_seconds'],
            properties: {
              projection: { type: 'string' },
              caught_up: { type: 'boolean' },
              events_behind: { type: 'integer', description: 'Events not yet projected: counted up to 100, estimated from $all positions beyond' },
              lag_seconds: { type: 'number' },
            },
          },
        },
      },
    },
    roles: {
      ...CHECK,
      description: 'What this instance runs (always ok): its roles, and for each lease it keeps (one per projection for the projector role, delivery, retention) whether it holds it or stands by',
      properties: {
        ...CHECK.properties,
        roles: { type: 'array', items: { type: 'string', enum: [...SERVICE_ROLES] } },
        leases: {
          type: 'array',
          items: {
            type: 'object',
            required: ['lease', 'held', 'holder'],
            properties: {
              lease: { type: 'string', enum: [...PROJECTION_LEASES, 'delivery', 'retention'] },
              held: { type: 'boolean', description: 'Whether this instance holds the lease and runs the work' },
              holder: nullable('string', { description: 'host:pid:nonce of the holder as this instance last saw it; null when nobody holds it' }),
            },
          },
        },
      },
    },
  },
};

export const ERASURE_REQUEST_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  description: 'The consumer, by e-mail and/or mobile (at least one).',
  properties: {
    // null, as an empty string, is a contact left out (normaliseConsumer).
    email: { ...CONSUMER_EMAIL, type: ['string', 'null'], description: CONSUMER_EMAIL.description.replace('Empty:', 'null or empty:') },
    mobile: { type: ['string', 'null'], description: 'Any form libphonenumber reads; a bare 10-digit number is taken as US. null or empty: left out.' },
    suppress: { type: 'boolean', default: false, description: 'Reject later leads with this mobile or e-mail (SUPPRESSED).' },
  },
};

/** A request recorded for an erasure, in the list of erasures; GET /functions/erasures/{erasure_id} has the whole erasure. */
export const ERASURE_ROW_SCHEMA = {
  type: 'object',
  required: ['erasure_id', 'erased_at', 'principal', 'fields', 'suppressed', 'leads_erased'],
  properties: {
    erasure_id: { type: 'string', pattern: '^[0-9a-f]{32}$' },
    erased_at: { type: 'string', format: 'date-time' },
    principal: { type: 'string', description: 'Who asked: the admin key (`admin:NAME`), or `cli`.' },
    fields: { type: 'array', items: { type: 'string', enum: ['email', 'mobile'] }, description: 'Which contacts named the consumer (never their values).' },
    suppressed: { type: 'boolean', description: 'Whether this request asked for later leads to be suppressed.' },
    leads_erased: { type: 'integer', description: 'The leads this request erased (its first request may have found none).' },
  },
};

export const ERASURE_ANSWER_SCHEMA = {
  type: 'object',
  required: ['ok', 'trace_id', 'code', 'message', 'erasure'],
  properties: {
    ok: { const: true },
    trace_id: { type: 'string', pattern: '^[0-9a-f]{32}$' },
    code: { const: 'OK' },
    message: { type: 'string' },
    erasure: {
      type: 'object',
      required: ['erasure_id', 'status', 'fields', 'suppressed', 'leads_erased', 'lead_ids', 'first_erased_at', 'last_erased_at', 'as_of', 'requests'],
      properties: {
        erasure_id: { type: 'string', pattern: '^[0-9a-f]{32}$' },
        status: { const: 'completed' },
        fields: { type: 'array', items: { type: 'string', enum: ['email', 'mobile'] }, description: 'Which contacts named the consumer (never their values).' },
        suppressed: { type: 'boolean' },
        leads_erased: { type: 'integer' },
        lead_ids: { type: 'array', items: { type: 'integer' } },
        first_erased_at: { type: 'string', format: 'date-time' },
        last_erased_at: { type: 'string', format: 'date-time' },
        as_of: {
          ...ref('Position'),
          description:
            'Where in the event log a look for the consumer\'s leads stopped: every lead of the consumer recorded up to here is erased; a lead recorded later is caught by asking again. ' +
            'The answer of POST /functions/erasures gives the last look of that request: after it erases what it found, a request looks again, and stops at a look that finds nothing new (or at its fifth, while posts of the consumer keep coming). ' +
            'Asked again, the answer (200 when nothing new) gives that request\'s own look, at or after the earlier answer\'s. ' +
            'GET /functions/erasures/{erasure_id} gives the look recorded last, made before the leads it found were erased, so at or before the as_of its request answered with.',
        },
        requests: {
          type: 'array',
          description: 'What was recorded, in order: each look of a request that erased leads or newly suppressed the contacts, and the erasure\'s first request even when it found none.',
          items: {
            type: 'object',
            properties: {
              erased_at: { type: 'string', format: 'date-time' },
              principal: { type: 'string', description: 'role:name of the key that asked, or cli.' },
              lead_ids: { type: 'array', items: { type: 'integer' } },
              suppressed: { type: 'boolean' },
            },
          },
        },
      },
    },
  },
};
