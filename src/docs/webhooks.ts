// What the service sends to a buyer's own endpoints, as OpenAPI 3.1 `webhooks`: a lead delivery,
// the `lead.erased` notice and a ping's bid request. A buyer's engineer writes the endpoint from
// this alone, so each says what is signed and how, and what each answer leads to. The docs tests
// check the bodies a real buyer endpoint receives against these schemas.

import { MAX_BACKOFF_MS } from '../delivery/backoff.js';
import { SIGNATURE_HEADER, TIMESTAMP_HEADER } from '../delivery/signature.js';
import { MAX_ANSWER_BYTES } from '../delivery/post-webhook.js';
import { DEFAULTS } from '../routing/config-schema.js';
import { CONSUMER_CONTACT_FIELDS } from './read-back-schemas.js';

type Json = Record<string, unknown>;
const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const CURRENCY = { type: 'string', pattern: '^[A-Z]{3}$', description: "The routing file's currency (ISO 4217), which the amounts are in." };

const TIMESTAMP: Json = {
  name: TIMESTAMP_HEADER, in: 'header', required: true,
  description:
    'When this request was sent, in unix seconds. Every attempt and every retry is stamped and signed afresh when it is sent, so a retry is never older than its own send: ' +
    'reject a request whose timestamp is more than a few minutes from your clock (5 minutes allows for clock skew and the longest timeout) to refuse a captured request replayed later.',
  schema: { type: 'string', pattern: '^[0-9]+$' },
};
const SIGNATURE: Json = {
  name: SIGNATURE_HEADER, in: 'header', required: false,
  description:
    '`sha256=` and the lower-case hex HMAC-SHA256 of `<timestamp>.<raw body>`: the `X-Leadpost-Timestamp` value, a dot, and the body bytes exactly as received (UTF-8), before any JSON parsing. ' +
    "The key is the buyer's secret as the operator set it in the variable its `secret_env` names, its characters taken as UTF-8 bytes (never hex- or base64-decoded). " +
    'Compare in constant time. Sent whenever that variable is set and not empty; without it nothing is signed.',
  schema: { type: 'string', pattern: '^sha256=[0-9a-f]{64}$' },
};
const idempotencyKey = (prefix: string, what: string): Json => ({
  name: 'Idempotency-Key', in: 'header', required: true,
  description: `\`${prefix}<lead_id>\`, the same on every attempt of ${what}: delivery is at least once, so a repeat can come after you stored the first. Answer a repeat with a 2xx, as you did the first: a 409 (as any 4xx but 408, 425 and 429) is final and records the ${what} failed.`,
  schema: { type: 'string', pattern: `^${prefix}[1-9][0-9]*$` },
});

const seconds = (ms: number) => `${ms / 1000} s`;
/** How a delivery or a notice is judged, by the status answered. */
const judged = (what: string): Record<string, Json> => ({
  '2XX': { description: `${what} is recorded as done when the status arrives; the answer's body is not kept, and one over ${MAX_ANSWER_BYTES / 1024} KiB closes the connection.` },
  '408': { description: `Retried, as 425, 429, every 5xx, a timeout (the buyer's \`timeout_ms\`, default ${seconds(DEFAULTS.timeout_ms)}) and a connection error are, up to the buyer's \`max_attempts\` (default ${DEFAULTS.max_attempts}): after the wait its \`Retry-After\` asks for (seconds or an HTTP date; at most ${seconds(MAX_BACKOFF_MS)}), else 2 s, 4 s, 8 s … (±20%, at most ${seconds(MAX_BACKOFF_MS)}). After the last attempt it is failed for good.` },
  '425': { description: 'Retried, as 408.' },
  '429': { description: 'Retried, as 408; `Retry-After` is honoured.' },
  '5XX': { description: 'Retried, as 408; `Retry-After` is honoured.' },
  default: { description: `Any other status — a 3xx (redirects are not followed), 400, 401, 403, 404, 409, 410, … — is final: ${what} is recorded failed and never sent again.` },
});

export const WEBHOOK_SCHEMAS: Record<string, Json> = {
  LeadDelivery: {
    type: 'object',
    required: ['lead_id', 'sid', 's1', 'price', 'currency', 'lead'],
    description: 'A sold, non-test lead, as the webhook buyer it was sold to receives it. It has no `type`: a body with `type` is a notice.',
    properties: {
      lead_id: { type: 'integer', minimum: 1 },
      sid: { type: 'string', description: "The supplier's source id." },
      s1: { type: ['string', 'null'], description: "The supplier's sub-id (a click id); null when it sent none." },
      price: { type: 'number', minimum: 0, description: 'What the buyer pays for the lead, in units of `currency` (dollars for USD), not in cents: `42.5` is 42.50, never a fraction of a cent.' },
      currency: CURRENCY,
      lead: {
        type: 'object',
        description: "The consumer's details, always present in a delivery: a lead whose personal data is erased before it is delivered is never sent.",
        required: ['first_name', 'last_name', 'email', 'mobile', 'mobile_national', 'zip', 'zip4', 'accident_state', 'certificate_url'],
        properties: {
          ...CONSUMER_CONTACT_FIELDS,
          certificate_url: { type: 'string', format: 'uri', description: 'The consent certificate (TrustedForm) URL as posted.' },
        },
      },
    },
  },
  LeadErasedNotice: {
    type: 'object',
    required: ['type', 'lead_id', 'reason'],
    description: 'The personal data of a lead this buyer was sent is gone: delete your copy.',
    properties: {
      type: { const: 'lead.erased' },
      lead_id: { type: 'integer', minimum: 1 },
      reason: { type: 'string', enum: ['consumer_request', 'retention'], description: '`consumer_request`: the consumer asked for erasure; `retention`: the lead passed PII_RETENTION_DAYS. Do the same either way.' },
    },
  },
  BidRequest: {
    type: 'object',
    required: ['ping_id', 'zip', 'accident_state', 'sid', 's1', 'test', 'currency'],
    description: "A ping's qualifying fields, never a name, e-mail or phone.",
    properties: {
      ping_id: { type: 'string', format: 'uuid' },
      zip: { type: 'string', pattern: '^[0-9]{5}$' },
      accident_state: { type: 'string', pattern: '^[A-Z]{2}$' },
      sid: { type: 'string' },
      s1: { type: ['string', 'null'] },
      test: { type: 'boolean', description: 'A test ping: its lead, if posted, is a test lead, never delivered.' },
      currency: { ...CURRENCY, description: 'The currency to bid in.' },
    },
  },
  BidAnswer: {
    type: 'object',
    required: ['bid'],
    properties: {
      bid: { type: ['number', 'null'], minimum: 0, description: 'The price offered, in units of the currency (dollars for USD), not in cents: `37.5` bids 37.50; a fraction of a cent (a third decimal) is no bid; null: no bid.' },
      currency: { type: 'string', description: 'Optional: the currency bid in, the code in either case; another than the request\'s is ignored (`currency_mismatch`).' },
    },
  },
};

export const WEBHOOKS: Record<string, Json> = {
  leadDelivery: {
    post: {
      tags: ['Buyers'],
      summary: 'A sold lead, POSTed to a webhook buyer',
      description:
        "Sent to the buyer's `delivery.url` for each sold, non-test lead. Delivery is at least once on the wire and exactly once as recorded: drop a repeat by its `Idempotency-Key`. " +
        'A repeat comes after a retry, and also within one attempt: a request that meets a reset before any answer on a kept-alive connection is sent once more on a new one, so a buyer that read it and dropped the connection unanswered gets it again. ' +
        'What each answer leads to is below; the delivery\'s state is in `GET /functions/deliveries` (`last_error`, `next_attempt_at`).',
      parameters: [idempotencyKey('lead-', 'the delivery'), TIMESTAMP, SIGNATURE],
      requestBody: { required: true, content: { 'application/json': { schema: ref('LeadDelivery') } } },
      responses: judged('The delivery'),
    },
  },
  leadErased: {
    post: {
      tags: ['Buyers'],
      summary: 'lead.erased: delete your copy of a lead',
      description:
        "Sent to the same `delivery.url` when a lead this buyer was sent (attempted at least once, whatever the answer) loses its personal data. Tell it from a delivery by its `type`. Signed, stamped and retried as a delivery.",
      parameters: [idempotencyKey('lead-erased-', 'the notice'), TIMESTAMP, SIGNATURE],
      requestBody: { required: true, content: { 'application/json': { schema: ref('LeadErasedNotice') } } },
      responses: judged('The notice'),
    },
  },
  bidRequest: {
    post: {
      tags: ['Buyers'],
      summary: 'A ping, POSTed to a webhook bidder',
      description:
        "Sent to the buyer's `ping.url` when a ping may go to it. Answer within its `timeout_ms` (default " + `${DEFAULTS.ping_timeout_ms} ms) and PING_DEADLINE_MS: a later answer is recorded \`timeout\` and ignored. ` +
        'Not retried, and without `Idempotency-Key`: two instances of the service may each ask about one `ping_id`, and a request that meets a reset before any answer on a kept-alive connection is sent once more on a new one, within the same deadline ' +
        '(a buyer that read it and dropped the connection unanswered gets it twice); answer each alike.',
      parameters: [TIMESTAMP, SIGNATURE],
      requestBody: { required: true, content: { 'application/json': { schema: ref('BidRequest') } } },
      responses: {
        '2XX': {
          description:
            "The bid. A bid over the buyer's `max_bid` (10,000 without one), under the routing file's `min_bid`, negative, with a third decimal, or in another currency is recorded and ignored; a body that is not `{\"bid\": number|null}` (4 KiB at most) is `invalid`.",
          content: { 'application/json': { schema: ref('BidAnswer'), examples: { bid: { value: { bid: 37.5 } }, noBid: { value: { bid: null } }, withCurrency: { value: { bid: 37.5, currency: 'USD' } } } } },
        },
        default: { description: 'Any other status: no bid (recorded `error`).' },
      },
    },
  },
};
