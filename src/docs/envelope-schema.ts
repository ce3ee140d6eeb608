// The decision envelope as JSON Schema, for the OpenAPI document. The code list
// and the HTTP statuses come from the OUTCOMES table itself; the compile-time checks at the bottom
// fail the build if this schema and the DecisionEnvelope type part ways, and the docs tests
// validate real responses against it.

import type { FromSchema } from 'json-schema-to-ts';
import { type DecisionEnvelope, OUTCOMES, type OutcomeCode } from '../http/envelope.js';

const OUTCOME_CODES = Object.keys(OUTCOMES) as OutcomeCode[];

export const FIELD_ERROR_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['field', 'code', 'message'],
  properties: {
    field: { type: 'string', description: 'The field (or query parameter) that failed; never its value. `*`: unknown members past the 20 named, or one whose name is no field name (only letters, digits, `_` and `-`), which is never repeated: it may be a consumer\'s e-mail or phone number sent as a name.' },
    code: { type: 'string', description: 'Machine-readable reason, e.g. required, invalid_format, too_long, unknown_field, region_not_allowed, repeated (a field given more than once in one body).' },
    message: { type: 'string' },
  },
} as const;

export const ENVELOPE_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['ok', 'trace_id', 'acceptance', 'lead_id', 'lead_status', 'sold', 'revenue', 'currency', 'code', 'message', 'Response'],
  properties: {
    ok: { type: 'boolean', description: 'true only when acceptance is accepted.' },
    trace_id: { type: 'string', pattern: '^[0-9a-f]{32}$', description: 'Also in the X-Trace-Id header; from traceparent when one was sent.' },
    acceptance: { type: 'string', enum: ['accepted', 'rejected', 'error'] },
    lead_id: { type: ['integer', 'null'], description: 'Set whenever a lead was recorded (also on INVALID, VERIFICATION_FAILED, DUPLICATE).' },
    lead_status: { type: ['string', 'null'], enum: ['sold', 'unsold', 'rejected', null] },
    sold: { type: 'boolean' },
    revenue: { type: 'number', description: 'The buyer price, 2 decimals; 0 when not sold.' },
    currency: {
      type: 'string',
      pattern: '^[A-Z]{3}$',
      description: "ISO 4217: the routing file's currency, on every answer (also one whose revenue is 0, or that recorded no lead); a lead's, the currency its routing recorded.",
    },
    code: { type: 'string', enum: OUTCOME_CODES, description: 'The outcome code; see the table in the introduction.' },
    message: { type: 'string', description: 'Human text; never PII or another supplier’s data.' },
    Response: {
      type: 'string',
      enum: ['Success', 'Failure', 'Error'],
      description: 'Success: done. Failure: the same request will fail again; fix it. Error: retry later (honour Retry-After).',
    },
    errors: {
      type: 'array',
      items: FIELD_ERROR_SCHEMA,
      description:
        'Each input concerned, never its value. On INVALID: every failing field (of a body, or a query parameter). On VERIFICATION_FAILED: the mobile or email that failed. ' +
        'On DUPLICATE, DUPLICATE_PENDING and SUPPRESSED: each of mobile and email concerned. On PING_MISMATCH: each field that differs from the ping. On PING_EXPIRED and PING_CONSUMED: ping_id. ' +
        'On IDEMPOTENCY_CONFLICT (422): Idempotency-Key, for a key that is not 1–255 visible ASCII characters (code invalid_format) or one used before with another body (code other_body). Absent on every other answer.',
    },
    test: { const: true, description: 'Present on test leads only.' },
    ping_id: { type: 'string', description: 'On a ping answer (BID, NO_BID): the id to post the lead with.' },
    bid: { type: ['number', 'null'], description: 'On a ping answer: the price the lead will sell for when posted before expires_at; null on NO_BID.' },
    expires_at: { type: 'string', format: 'date-time', description: 'On a ping answer: the ping_id is good until then (PING_TTL_SECONDS).' },
  },
} as const;

// Both directions: every envelope the code can build fits the schema, and the schema allows
// nothing the type lacks.
type Documented = FromSchema<typeof ENVELOPE_SCHEMA>;
const builtFitsSchema = (envelope: DecisionEnvelope): Documented => envelope;
const schemaFitsType = (envelope: Documented): DecisionEnvelope => envelope;
void builtFitsSchema;
void schemaFitsType;
