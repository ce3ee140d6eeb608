// Examples for the reference documentation, made by the code that makes real responses: a lead's
// envelope comes from the decider (decide → fold → outcomeOf → leadEnvelope) fed by the real lead validator, a
// response without a lead from noLeadEnvelope. An example cannot show a field the service does
// not send, or miss one it does.

import { decide, foldLead, initialLeadState, outcomeOf, type PostLeadCommand } from '../commands/post-lead/decider.js';
import type { CheckResult, Enrichment } from '../enrichment/check.js';
import { type DecisionEnvelope, leadEnvelope, noLeadEnvelope, OUTCOMES, type OutcomeCode } from '../http/envelope.js';
import { HEADERS_TOO_LARGE_MESSAGE } from '../http/client-error.js';
import { INVALID_INPUT_MESSAGE, MAY_BE_RECORDED_MESSAGE, NO_HOST_MESSAGE } from '../http/shell.js';
import { PING_INVALID_MESSAGE, pingEnvelope } from '../http/ping-route.js';
import { malformedKeyEnvelope, otherBodyEnvelope, pendingEnvelope } from '../http/post-lead-route.js';
import { createLeadValidator, createPingValidator } from '../leads/validate.js';
import { ReadBack, ReadBackInputError } from '../read-models/read-back.js';
import { DEFAULTS } from '../routing/config-schema.js';

const EXAMPLE_TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
/** The examples' routing file names no currency: its default. */
const EXAMPLE_CURRENCY = DEFAULTS.currency;

export const EXAMPLE_LEAD = {
  first_name: 'Ada',
  last_name: 'Lovelace',
  email: 'ada.lovelace@outlook.com',
  mobile: '+12135550143',
  zip: '90210',
  accident_state: 'CA',
  certificate_url: 'https://cert.trustedform.com/0123456789abcdef0123456789abcdef01234567',
  sid: 'google-ads',
  s1: 'click-123',
} as const;

/** A ping: the lead's qualifying fields, no consumer. */
export const EXAMPLE_PING = { zip: '90210', accident_state: 'CA', sid: 'google-ads', s1: 'click-123' } as const;

const EXAMPLE_PING_ID = '3f9c2a1e-7b4d-8e05-9a6c-1d2e3f4a5b6c';

/** The same lead with two broken fields, as a supplier might send it. */
export const EXAMPLE_INVALID_LEAD = { ...EXAMPLE_LEAD, email: 'ada@', zip: '9021' } as const;

const pass: CheckResult = { result: 'pass', provider: 'example', detail: 'ok' };
const PASSED: Enrichment = { phone: pass, email: pass, consent: pass };

function decided(lead: Readonly<Record<string, unknown>>, rest: Partial<PostLeadCommand>): DecisionEnvelope {
  const command: PostLeadCommand = {
    leadId: 1042,
    supplier: 'supplier-1',
    keyId: 'k1',
    now: new Date('2026-11-21T15:04:05Z'),
    validation: createLeadValidator()(lead),
    ...rest,
  };
  return leadEnvelope(outcomeOf(foldLead(decide(command, initialLeadState)), EXAMPLE_CURRENCY), EXAMPLE_TRACE_ID);
}

const routing = (kind: 'buyer' | 'bucket', id: string, price: number): PostLeadCommand['routing'] => ({
  target: { kind, id },
  price,
  currency: EXAMPLE_CURRENCY,
  strategy: 'highest_price',
  version: 'example',
  candidates: [],
});

/** The field errors of a read-back query with a bad limit, from the read-back code itself (it fails before any store is read). */
async function badQueryErrors(): Promise<DecisionEnvelope['errors']> {
  const unused = () => {
    throw new Error('not reached: the query is checked first');
  };
  const readBack = new ReadBack({ events: unused as never, personalData: unused as never, readModels: unused as never, collection: unused, position: unused, routing: unused });
  try {
    await readBack.deliveries({ keyId: 'k1', role: 'analyst', name: 'analyst-1' }, { limit: '0', status: 'lost' });
  } catch (error) {
    if (error instanceof ReadBackInputError) return error.errors;
    throw error;
  }
  throw new Error('the bad example query passed');
}

/**
 * Besides the outcome codes: IDEMPOTENCY_CONFLICT_OTHER_BODY (a reused key with another body, 422),
 * IDEMPOTENCY_CONFLICT_MALFORMED_KEY (a key that is not 1–255 visible ASCII characters, 422),
 * INVALID_INPUT (a read-back query or feedback body that breaks a rule, 422 INVALID), PING_INVALID
 * (a ping with a failing field, 422 INVALID) and
 * HEADERS_TOO_LARGE (request headers over the limit, 431 PAYLOAD_TOO_LARGE), NOT_HTTP (a request
 * that is not valid HTTP/1.1, such as one without Host, 400 MALFORMED_JSON) and
 * UNAVAILABLE_MAY_BE_RECORDED (a lead's append EventStoreDB took and never answered, 503 UNAVAILABLE).
 */
export type ExampleName =
  | OutcomeCode
  | 'IDEMPOTENCY_CONFLICT_OTHER_BODY'
  | 'IDEMPOTENCY_CONFLICT_MALFORMED_KEY'
  | 'INVALID_INPUT'
  | 'PING_INVALID'
  | 'HEADERS_TOO_LARGE'
  | 'NOT_HTTP'
  | 'UNAVAILABLE_MAY_BE_RECORDED';

/** The example envelopes, one per ExampleName. */
export async function exampleEnvelopes(): Promise<Record<ExampleName, DecisionEnvelope>> {
  const examples = Object.fromEntries(
    (Object.keys(OUTCOMES) as OutcomeCode[]).map((code) => [code, noLeadEnvelope(code, EXAMPLE_TRACE_ID, EXAMPLE_CURRENCY)]),
  ) as Record<ExampleName, DecisionEnvelope>;
  examples.SOLD = decided(EXAMPLE_LEAD, { enrichment: PASSED, routing: routing('buyer', 'acme-law', 42.5) });
  examples.UNSOLD = decided(EXAMPLE_LEAD, { enrichment: PASSED, routing: routing('bucket', 'unsold', 0) });
  examples.INVALID = decided(EXAMPLE_INVALID_LEAD, {});
  examples.VERIFICATION_FAILED = decided(EXAMPLE_LEAD, {
    enrichment: { ...PASSED, phone: { result: 'fail', provider: 'libphonenumber', detail: 'toll_free' } },
  });
  examples.DUPLICATE = decided(EXAMPLE_LEAD, { duplicates: ['mobile', 'email'] });
  examples.SUPPRESSED = decided(EXAMPLE_LEAD, { suppressed: ['email'] });
  const pinged = { ...EXAMPLE_LEAD, ping_id: EXAMPLE_PING_ID };
  examples.PING_EXPIRED = decided(pinged, { pingRejection: { code: 'PING_EXPIRED', errors: [{ field: 'ping_id', code: 'ping_expired', message: 'ping_id is past its expiry; ping again' }] } });
  examples.PING_CONSUMED = decided(pinged, { pingRejection: { code: 'PING_CONSUMED', errors: [{ field: 'ping_id', code: 'ping_consumed', message: 'ping_id was already posted' }] } });
  examples.PING_MISMATCH = decided(pinged, { pingRejection: { code: 'PING_MISMATCH', errors: [{ field: 'zip', code: 'ping_mismatch', message: "zip differs from the ping's" }] } });
  const answer = { ping_id: EXAMPLE_PING_ID, currency: EXAMPLE_CURRENCY, expires_at: '2026-11-21T15:09:05.000Z', test: false } as const;
  examples.BID = pingEnvelope({ ...answer, code: 'BID', bid: 37.5 }, EXAMPLE_TRACE_ID);
  examples.NO_BID = pingEnvelope({ ...answer, code: 'NO_BID', bid: null }, EXAMPLE_TRACE_ID);
  examples.IDEMPOTENCY_CONFLICT_OTHER_BODY = otherBodyEnvelope(EXAMPLE_TRACE_ID, EXAMPLE_CURRENCY);
  examples.IDEMPOTENCY_CONFLICT_MALFORMED_KEY = malformedKeyEnvelope(EXAMPLE_TRACE_ID, EXAMPLE_CURRENCY);
  examples.DUPLICATE_PENDING = pendingEnvelope(['email'], EXAMPLE_TRACE_ID, EXAMPLE_CURRENCY);
  examples.HEADERS_TOO_LARGE = noLeadEnvelope('PAYLOAD_TOO_LARGE', EXAMPLE_TRACE_ID, EXAMPLE_CURRENCY, { message: HEADERS_TOO_LARGE_MESSAGE });
  examples.NOT_HTTP = noLeadEnvelope('MALFORMED_JSON', EXAMPLE_TRACE_ID, EXAMPLE_CURRENCY, { message: NO_HOST_MESSAGE });
  examples.UNAVAILABLE_MAY_BE_RECORDED = noLeadEnvelope('UNAVAILABLE', EXAMPLE_TRACE_ID, EXAMPLE_CURRENCY, { message: MAY_BE_RECORDED_MESSAGE });
  const badPing = createPingValidator()({ ...EXAMPLE_PING, zip: '9021' });
  if (badPing.ok) throw new Error('the bad example ping passed');
  examples.PING_INVALID = noLeadEnvelope('INVALID', EXAMPLE_TRACE_ID, EXAMPLE_CURRENCY, { message: PING_INVALID_MESSAGE, errors: badPing.errors });
  examples.INVALID_INPUT = noLeadEnvelope('INVALID', EXAMPLE_TRACE_ID, EXAMPLE_CURRENCY, { errors: await badQueryErrors(), message: INVALID_INPUT_MESSAGE });
  return examples;
}
