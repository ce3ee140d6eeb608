// Which route answers what, for the OpenAPI document: roles, parameters, body, success and the
// envelope codes each route can answer with. Field rules are not written here: bodies refer to
// the components built from the ajv schemas, query parameters use the read-back code's lists.

import { FEEDBACK_SCHEMA } from '../commands/after-sale.js';
import { REDELIVERY_MESSAGES } from '../http/redeliver-route.js';
import type { Role } from '../keys/principal.js';
import { DEFAULT_LIMIT, DELIVERY_STATUSES, LEAD_STATUSES, MAX_LIMIT, REPORT_TEST_MODES } from '../read-models/read-back.js';
import { GROUP_BY } from '../read-models/report.js';
import { EXAMPLE_LEAD, EXAMPLE_PING, type ExampleName } from './examples.js';
import { CONSUMER_EMAIL } from './posted.js';
import { listBody, readBackBody } from './read-back-schemas.js';

export type Json = Record<string, unknown>;
export type Method = 'get' | 'post';
type Tag = 'Suppliers' | 'Read-back' | 'Buyers' | 'Personal data' | 'Operations';

interface Success {
  readonly status: number;
  readonly description: string;
  readonly content: Json;
  readonly headers?: readonly string[];
}

export interface RouteDoc {
  readonly method: Method;
  /** As the router writes it: `/functions/leads/:lead_id`. */
  readonly path: string;
  readonly tag: Tag;
  readonly summary: string;
  readonly description: string;
  /** Roles whose X-API-KEY may call it; omitted: no key. */
  readonly roles?: readonly Role[];
  readonly parameters?: readonly Json[];
  /** `optional`: the route takes the request with no body at all. */
  readonly body?: { readonly schema: string; readonly example?: unknown; readonly optional?: true };
  readonly success: Success;
  /** Other statuses the route answers with when it succeeds (an erasure asked again: 200). */
  readonly alsoSuccess?: readonly Success[];
  /**
   * The envelope codes this route can answer with, besides those every route can: HTTPS_REQUIRED,
   * NOT_HTTP (400 MALFORMED_JSON), REQUEST_TIMEOUT (408), HEADERS_TOO_LARGE (431) and INTERNAL_ERROR.
   */
  readonly outcomes: readonly ExampleName[];
  /** What this route says for an outcome in words of its own, where the shared message speaks of other routes. */
  readonly messages?: Partial<Readonly<Record<ExampleName, string>>>;
  /** Kept for the clients that use it; the description names the route to use instead. */
  readonly deprecated?: true;
}

export const ref = (kind: string, name: string) => ({ $ref: `#/components/${kind}/${name}` });
export const schema = (name: string) => ref('schemas', name);
const json = (body: Json) => ({ 'application/json': { schema: body } });
const query = (name: string, description: string, body: Json) => ({ name, in: 'query', required: false, description, schema: body });
const LEAD_ID = { name: 'lead_id', in: 'path', required: true, schema: { type: 'integer', minimum: 1 } };
const PAGING = [
  query('cursor', 'next_cursor of the previous page.', { type: 'string' }),
  query('limit', `Rows per page, 1–${MAX_LIMIT}.`, { type: 'integer', minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT }),
];
const INSTANT = { type: 'string', description: 'ISO 8601 date, or date and time (`2026-11-21T08:00`, seconds and fraction optional) with an offset (`Z`, `-05:00`) or none, which is UTC.', examples: ['2026-11-21T00:00:00Z'] };
/** Every keyed route is limited per key (see the openapi document's RateLimit headers). */
const KEYED_ERRORS: readonly ExampleName[] = ['RATE_LIMITED', 'UNAUTHORIZED', 'FORBIDDEN', 'UNAVAILABLE'];
/** An access request's answer: the consumer's leads. */
const CONSUMER_LEADS = readBackBody({ leads_found: { type: 'integer' }, items: { type: 'array', items: ref('schemas', 'LeadView') } }, ['leads_found', 'items']);

export const ROUTE_DOCS: readonly RouteDoc[] = [
  {
    method: 'post',
    path: '/functions/leads',
    tag: 'Suppliers',
    summary: 'Post a lead',
    description:
      'Authenticate → validate and normalise → dedupe → verify (phone, e-mail, consent) → route → record in one atomic append → answer. ' +
      'The decision (accepted, sold, for how much) is in the response. Every field rule is in the Lead schema; every failing field is named in `errors`. ' +
      'The lead\'s supplier is the key\'s name; an admin key may post too, and its name is then the supplier.',
    roles: ['supplier', 'admin'],
    parameters: [ref('parameters', 'IdempotencyKey')],
    body: { schema: 'Lead', example: EXAMPLE_LEAD },
    success: { status: 201, description: 'Accepted: SOLD or UNSOLD.', content: json(schema('DecisionEnvelope')), headers: ['Idempotency-Replayed'] },
    outcomes: [
      'SOLD', 'UNSOLD', 'INVALID', 'VERIFICATION_FAILED', 'DUPLICATE', 'DUPLICATE_PENDING', 'SUPPRESSED', 'MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', 'PAYLOAD_TOO_LARGE',
      'IDEMPOTENCY_CONFLICT', 'IDEMPOTENCY_CONFLICT_OTHER_BODY', 'IDEMPOTENCY_CONFLICT_MALFORMED_KEY', 'PING_EXPIRED', 'PING_CONSUMED', 'PING_MISMATCH', 'NOT_FOUND', ...KEYED_ERRORS, 'UNAVAILABLE_MAY_BE_RECORDED',
    ],
  },
  {
    method: 'post',
    path: '/functions/pings',
    tag: 'Suppliers',
    summary: 'Ping: what would this lead fetch?',
    description:
      'Send the lead\'s qualifying fields (no name, e-mail or phone) and get the best bid: every buyer that bids on pings and may take the lead now is asked at once ' +
      '(a static bidder bids its price; a webhook bidder is sent the ping signed as deliveries are and answers `{"bid": number|null}`, optionally with the ping\'s `"currency"`, in either case (another is ignored as invalid), within its own timeout). ' +
      'The answer comes by PING_DEADLINE_MS (default 1 s) with the bids in by then; the highest wins, ties by priority; a bid under the routing file\'s `min_bid`, or over its `max_bid` (10,000 when a webhook bidder sets none), is ignored. ' +
      '`BID` gives `bid`, the price the lead will sell for when posted with `ping_id` before `expires_at` (PING_TTL_SECONDS, default 300); `NO_BID`: no buyer bid (a post with the ping_id is routed as usual). ' +
      'No lead is recorded (`lead_id` null). The same fields pinged again by the same supplier before expiry get the same answer, and no buyer is asked again. ' +
      'Pings have their own rate limit (PING_RATE_LIMIT_PER_SECOND). Then POST /functions/leads with `ping_id`: sold to the winning bid at its price if that buyer can still take it, else to the next bid still standing, else routed as a plain post.',
    roles: ['supplier', 'admin'],
    body: { schema: 'Ping', example: EXAMPLE_PING },
    success: { status: 201, description: 'Answered: BID or NO_BID, with ping_id, bid and expires_at.', content: json(schema('DecisionEnvelope')) },
    outcomes: ['BID', 'NO_BID', 'PING_INVALID', 'MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', 'PAYLOAD_TOO_LARGE', ...KEYED_ERRORS],
  },
  {
    method: 'get',
    path: '/functions/leads',
    tag: 'Read-back',
    summary: 'List leads',
    description:
      'Lead views, newest first by received_at: a supplier gets its own leads, a buyer the leads it bought, an analyst or admin every lead. ' +
      'Each row is the lead view of GET /functions/leads/{lead_id} with the same rule for consumer fields (`lead` is null for an analyst, and for a buyer or supplier on a lead not its own). ' +
      'A rejected lead carries its `errors`, each failing field named.',
    roles: ['supplier', 'buyer', 'analyst', 'admin'],
    parameters: [
      query('status', 'Lead status.', { type: 'string', enum: LEAD_STATUSES }),
      query('code', 'Outcome code of the post.', { type: 'string', pattern: '^[A-Z][A-Z_]{0,39}$', examples: ['INVALID', 'SOLD'] }),
      query('sid', 'Supplier source id.', { type: 'string', pattern: '^[A-Za-z0-9._-]{1,64}$' }),
      query('since', 'Received at or after.', INSTANT),
      query('until', 'Received before.', INSTANT),
      ...PAGING,
    ],
    success: { status: 200, description: 'A page of leads.', content: json(listBody('LeadView')) },
    outcomes: ['INVALID_INPUT', 'UNAUTHORIZED', 'RATE_LIMITED', 'UNAVAILABLE'],
  },
  {
    method: 'get',
    path: '/functions/leads/:lead_id',
    tag: 'Read-back',
    summary: 'Read a lead',
    description:
      'Status, outcome code, buyer or bucket, price, enrichment summary, delivery, feedback. A lead the caller may not see is a 404, exactly like one that does not exist. ' +
      'Folded from the lead\'s own events, never from a read model that may be behind: a lead just posted is readable at once.',
    roles: ['supplier', 'buyer', 'analyst', 'admin'],
    parameters: [LEAD_ID],
    success: { status: 200, description: 'The lead.', content: json(readBackBody({ lead: schema('LeadView') }, ['lead'])) },
    outcomes: ['NOT_FOUND', 'UNAUTHORIZED', 'RATE_LIMITED', 'UNAVAILABLE'],
  },
  {
    method: 'get',
    path: '/functions/leads/:lead_id/events',
    tag: 'Read-back',
    summary: 'Read a lead\'s events',
    description:
      'The lead\'s event stream in order: why it was rejected, each check\'s result, which buyers were considered and why each was or was not eligible, each delivery attempt, feedback. ' +
      'Visible to whoever may read the lead (else 404). The consumer fields of `LeadReceived` (names, e-mail, mobile, zip, certificate) only for the supplier that sent it, the buyer that bought it, and admin; ' +
      'an analyst gets `lead` with its routing fields only (accident_state, sid, s1, test). Its `contacts` (keyed hashes of the consumer\'s e-mail and mobile) only for admin. A buyer sees only its own routing candidate, never the other buyers or their prices, and not the supplier\'s key id. ' +
      'Read from the stream itself, so a lead just posted is complete here. ' +
      'A lead posted with a `ping_id` also has its ping\'s stream in `ping_events` (LeadPinged, PingBidsCollected with every buyer\'s bid, PingPosted); a buyer sees only its own bid there too, and LeadPinged\'s `zip` (the consumer\'s, as the lead\'s must equal it) goes only to those who see the consumer fields.',
    roles: ['supplier', 'buyer', 'analyst', 'admin'],
    parameters: [LEAD_ID],
    success: {
      status: 200,
      description: 'The events, oldest first.',
      content: json(
        readBackBody(
          {
            lead_id: { type: 'integer' },
            items: { type: 'array', items: schema('LeadEvent') },
            ping_events: { type: 'array', items: schema('LeadEvent'), description: "The events of the lead's ping, oldest first; empty when it was posted without one." },
          },
          ['lead_id', 'items', 'ping_events'],
        ),
      ),
    },
    outcomes: ['NOT_FOUND', 'UNAUTHORIZED', 'RATE_LIMITED', 'UNAVAILABLE'],
  },
  {
    method: 'get',
    path: '/functions/deliveries',
    tag: 'Read-back',
    summary: 'List deliveries',
    description: 'One row per sold or unsold (non-test) lead, newest first, within the caller’s scope. A pull buyer lists its pending leads here.',
    roles: ['supplier', 'buyer', 'analyst', 'admin'],
    parameters: [
      query('status', 'Delivery status.', { type: 'string', enum: DELIVERY_STATUSES }),
      query('buyer', 'Buyer id.', { type: 'string' }),
      query('bucket', 'Bucket id (unsold leads).', { type: 'string' }),
      query('since', 'Created at or after.', INSTANT),
      query('until', 'Created before.', INSTANT),
      ...PAGING,
    ],
    success: { status: 200, description: 'A page of deliveries.', content: json(listBody('DeliveryRow')) },
    outcomes: ['INVALID_INPUT', 'UNAUTHORIZED', 'RATE_LIMITED', 'UNAVAILABLE'],
  },
  {
    method: 'get',
    path: '/functions/feedback',
    tag: 'Read-back',
    summary: 'List feedback',
    description: 'What buyers said about the caller’s leads (or, for a buyer, what it said), newest first.',
    roles: ['supplier', 'buyer', 'analyst', 'admin'],
    parameters: [
      query('type', 'Feedback type.', { type: 'string', enum: FEEDBACK_SCHEMA.properties.type.enum }),
      query('since', 'Recorded at or after.', INSTANT),
      ...PAGING,
    ],
    success: { status: 200, description: 'A page of feedback.', content: json(listBody('FeedbackRow')) },
    outcomes: ['INVALID_INPUT', 'UNAUTHORIZED', 'RATE_LIMITED', 'UNAVAILABLE'],
  },
  {
    method: 'get',
    path: '/functions/reports/summary',
    tag: 'Read-back',
    summary: 'Summary report',
    description:
      'Rows of received, accepted, sold, unsold, rejected (and per code), returned, pings, bids, ping_posts, revenue, net_revenue, acceptance_rate, sell_rate, avg_price, avg_bid per group. ' +
      'pings count under the ping\'s supplier, sid and state; bids and avg_bid under the buyer that bid; ping_posts under the buyer the lead sold to at its bid. ' +
      'A supplier sees its own rows; buyers may not read reports. ' +
      'Rows come in the order of their group key (s1 first when grouped by it, then the dimensions as asked; null first) and page with `cursor`/`limit` like every list. ' +
      'A report by s1 has about one row per lead: it is summed in the store from the lead views, which carry each lead\'s counters, a page at a time. ' +
      'Money of two currencies is never added up: a range over a change of the routing file\'s currency is `422 INVALID`, `from` and `to` named with code `mixed_currencies`. ' +
      '`Accept: text/csv` gives every row as CSV, streamed as it is read (`cursor` and `limit` apply to JSON only); cells that would start a formula are prefixed with \'.',
    roles: ['supplier', 'analyst', 'admin'],
    parameters: [
      query('from', 'First local day, YYYY-MM-DD (default: 6 days before today).', { type: 'string', format: 'date' }),
      query('to', 'Last local day, YYYY-MM-DD (default: today); at most 366 days after from.', { type: 'string', format: 'date' }),
      query('tz', 'IANA time zone the days are taken in.', { type: 'string', default: 'UTC', examples: ['America/New_York'] }),
      query('group_by', `Comma-separated, distinct: ${GROUP_BY.join(', ')}.`, { type: 'string', default: 'day', examples: ['day,sid'] }),
      query('test', 'Test leads: left out, only them, or both.', { type: 'string', enum: REPORT_TEST_MODES, default: 'exclude' }),
      query('totals', 'true: the page also carries `totals`, the whole range\'s metrics with no dimension (JSON only).', { type: 'string', enum: ['true', 'false'], default: 'false' }),
      ...PAGING,
    ],
    success: {
      status: 200,
      description: 'A page of report rows.',
      content: {
        ...json(
          listBody('ReportRow', {
            from: { type: 'string' },
            to: { type: 'string' },
            tz: { type: 'string' },
            group_by: { type: 'array', items: { type: 'string', enum: GROUP_BY } },
            currency: { type: 'string', pattern: '^[A-Z]{3}$', description: "The currency revenue, net_revenue, avg_price and avg_bid are in: the one the range's money was recorded in, or the routing file's when the range holds none." },
            totals: {
              ...ref('schemas', 'ReportRow'),
              description:
                'With `totals=true`: the metrics of every row of the report, on every page, with no dimension (its rates and averages those of the totals). Grouped by s1 it counts no pings, bids or ping-posts, as its rows do: a ping has no click id.',
            },
          }),
        ),
        'text/csv': { schema: { type: 'string' }, example: 'day,received,accepted,sold,...\n2026-11-21,120,96,80,...\n' },
      },
      headers: ['Content-Disposition'],
    },
    outcomes: ['INVALID_INPUT', 'UNAUTHORIZED', 'FORBIDDEN', 'RATE_LIMITED', 'UNAVAILABLE'],
  },
  {
    method: 'post',
    path: '/functions/deliveries/:lead_id/ack',
    tag: 'Buyers',
    summary: 'Acknowledge a pulled lead',
    description:
      'Marks the delivery `delivered`. Idempotent: a second ack answers the first time. ' +
      'A delivery cancelled because the lead\'s personal data was erased or expired, or the buyer returned the lead, before it was acknowledged cannot be: `409 DELIVERY_CANCELLED`, nothing is recorded and the delivery stays `cancelled`. ' +
      'A lead of a buyer whose leads go to its webhook is not acknowledged: `409 NOT_PULLED` (the worker delivers it; answer the delivery with a 2xx). ' +
      'No body is needed. One that is sent must be JSON and empty (`{}`): a field in it is refused `422` (an acknowledgement takes none), a body that is not JSON `400`, one over the body limit `413`.',
    roles: ['buyer', 'admin'],
    parameters: [LEAD_ID],
    success: {
      status: 200,
      description: 'Delivered.',
      content: json({
        type: 'object',
        required: ['ok', 'trace_id', 'code', 'message', 'delivery'],
        properties: {
          ok: { const: true }, trace_id: { type: 'string' }, code: { const: 'OK' }, message: { type: 'string' },
          delivery: { type: 'object', properties: { lead_id: { type: 'integer' }, status: { const: 'delivered' }, delivered_at: { type: 'string', format: 'date-time' } } },
        },
      }),
    },
    outcomes: ['DELIVERY_CANCELLED', 'NOT_PULLED', 'NOT_FOUND', 'INVALID_INPUT', 'MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', 'PAYLOAD_TOO_LARGE', ...KEYED_ERRORS],
  },
  {
    method: 'post',
    path: '/functions/deliveries/:lead_id/redeliver',
    tag: 'Buyers',
    summary: 'Send a failed delivery (or lead.erased notice) again',
    description:
      'For an admin, once a webhook buyer has fixed its side (it rotated the secret it checks signatures with and answered 401 meanwhile, or was down longer than its `max_attempts` last): ' +
      'a delivery that failed for good (`status: failed`) is re-opened, `pending` and due at once, with a fresh round of the buyer\'s `max_attempts`; attempt numbers go on from the last one. ' +
      'The buyer is sent the lead with the same `Idempotency-Key: lead-<id>`, so a buyer that has it already drops the copy. ' +
      'The body is optional; `reason` is a snake_case code recorded on the lead\'s `LeadRedeliveryRequested` event. ' +
      'A lead that is not sold, a test lead or no lead at all: `404`. A delivery pending, under way or delivered (a pull buyer\'s lead never fails: it waits for its acknowledgement): `409 NOT_FAILED`. ' +
      'A lead whose personal data was erased or expired has no delivery left to make, but the webhook buyer that received it may not have taken its `lead.erased` notice: when that notice failed for good (the row\'s `notice: failed`, the buyer down longer than its `max_attempts` last), it is the notice that is re-opened, `pending` and due at once, with a fresh round of `max_attempts` (attempt numbers go on; the same `Idempotency-Key: lead-erased-<id>`), recorded as `ErasureNoticeRedeliveryRequested`; the answer\'s `message` says which of the two was re-opened. ' +
      'Such a lead whose notice was sent or is still being sent: `409 NOT_FAILED`; one with no notice (its buyer pulls, or was never sent it): `409 DELIVERY_CANCELLED`, there is nothing left to send. A lead the buyer returned: `409 ALREADY_RETURNED`. A lead whose buyer the routing file in force no longer has: `409 BUYER_UNKNOWN` (re-opened, it would wait for ever). Of two requests at once, one re-opens the delivery (or the notice) and the other gets `409 NOT_FAILED`.',
    roles: ['admin'],
    parameters: [LEAD_ID],
    body: { schema: 'Redelivery', example: { reason: 'secret_rotated' }, optional: true },
    success: {
      status: 202,
      description: 'Re-opened: the delivery row as it now stands (folded from the lead\'s own events, so never behind), `pending` with `next_attempt_at` now; for an erased or expired lead, its `notice` `pending` with `notice_next_at` now.',
      content: json({
        type: 'object',
        required: ['ok', 'trace_id', 'code', 'message', 'delivery'],
        properties: { ok: { const: true }, trace_id: { type: 'string' }, code: { const: 'OK' }, message: { type: 'string' }, delivery: schema('DeliveryRow') },
      }),
    },
    outcomes: [
      'NOT_FAILED', 'DELIVERY_CANCELLED', 'ALREADY_RETURNED', 'BUYER_UNKNOWN', 'NOT_FOUND', 'INVALID_INPUT', 'MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', 'PAYLOAD_TOO_LARGE',
      ...KEYED_ERRORS,
    ],
    messages: REDELIVERY_MESSAGES,
  },
  {
    method: 'post',
    path: '/functions/leads/:lead_id/feedback',
    tag: 'Buyers',
    summary: 'Send feedback on a bought lead',
    description:
      'A return needs a reason from the buyer’s return_reasons, must come within its return window and can happen once (a second return, the same one sent again included, is `409 ALREADY_RETURNED`); it reverses the revenue in reports. ' +
      'A conversion or contact sent again with the same `type` and `reason` (after an answer that was lost) records nothing: `200` with the feedback recorded first. Another `reason` is new feedback. ' +
      'A return from a buyer the routing file in force no longer has is `409 BUYER_UNKNOWN`: its return reasons and window went with it.',
    roles: ['buyer', 'admin'],
    parameters: [LEAD_ID],
    body: { schema: 'Feedback', example: { type: 'return', reason: 'bad_phone' } },
    success: {
      status: 201,
      description: 'Recorded.',
      content: json({
        type: 'object',
        required: ['ok', 'trace_id', 'code', 'message', 'feedback'],
        properties: { ok: { const: true }, trace_id: { type: 'string' }, code: { const: 'OK' }, message: { type: 'string' }, feedback: schema('FeedbackRow') },
      }),
    },
    alsoSuccess: [
      {
        status: 200,
        description: 'Recorded already: the same conversion or contact (type and reason) was recorded before; nothing new is recorded, and `feedback` is the one recorded first.',
        content: json({
          type: 'object',
          required: ['ok', 'trace_id', 'code', 'message', 'feedback'],
          properties: { ok: { const: true }, trace_id: { type: 'string' }, code: { const: 'OK' }, message: { type: 'string' }, feedback: schema('FeedbackRow') },
        }),
      },
    ],
    outcomes: [
      'INVALID_INPUT', 'RETURN_WINDOW_CLOSED', 'ALREADY_RETURNED', 'BUYER_UNKNOWN', 'NOT_FOUND', 'MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', 'PAYLOAD_TOO_LARGE',
      ...KEYED_ERRORS,
    ],
  },
  {
    method: 'post',
    path: '/functions/erasures',
    tag: 'Personal data',
    summary: "Erase a consumer's personal data",
    description:
      'Finds every lead of the consumer named by `email` and/or `mobile` (normalised as a posted lead\'s: lower-cased e-mail; a mobile in any form, a bare 10-digit number taken as US), ' +
      'sold, rejected or test, as of the moment asked; destroys their data keys, so their personal fields can never be read again; records the erasure (contact hashes, lead ids, when, by whom; no personal data). ' +
      'The lead views, deliveries and event reads then show `erased: true` and no personal field; a pending delivery is cancelled; outcomes and reports are unchanged. ' +
      'With `suppress: true`, later leads with that mobile or e-mail are rejected `SUPPRESSED`. ' +
      'The erasure id is derived from the consumer\'s contacts: asking again (after a failure, or later) continues the same erasure — 201 when it recorded something new (a lead erased, the contacts newly suppressed, or the erasure\'s first request), ' +
      '200 when not, with the record as it stands but for `as_of`, which is where this request\'s own look stopped.',
    roles: ['admin'],
    body: { schema: 'ErasureRequest', example: { email: 'ada@example.com', mobile: '2025550143', suppress: true } },
    success: {
      status: 201,
      description: 'Erased: the request recorded something new. `as_of` is where its last look stopped; `Location` names the erasure.',
      content: json(schema('ErasureAnswer')),
      headers: ['Location'],
    },
    alsoSuccess: [
      {
        status: 200,
        description:
          'Asked again with nothing new to erase or suppress: nothing is recorded, and the answer is the erasure as recorded, except `as_of`, which is where this request\'s look stopped ' +
          '(at or after the `as_of` of any earlier answer). `Location` names the erasure.',
        content: json(schema('ErasureAnswer')),
        headers: ['Location'],
      },
    ],
    outcomes: ['INVALID_INPUT', 'MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', 'PAYLOAD_TOO_LARGE', ...KEYED_ERRORS],
  },
  {
    method: 'get',
    path: '/functions/erasures',
    tag: 'Personal data',
    summary: 'List erasures',
    description:
      'Every request recorded for an erasure, the newest first: the first request of each erasure, and each later one that erased more leads or newly suppressed the contacts (asked again with nothing new, a request records nothing). ' +
      'This is the record of consumers\' requests to delete that a business keeps. From the read models (`position` says how far they reflect the event log); a request is in it once the answer to its POST has come. ' +
      '`since` and `until` bound the time of the request. A row names which contacts named the consumer, never their values; GET /functions/erasures/{erasure_id} has the whole erasure with its leads.',
    roles: ['admin'],
    parameters: [query('since', 'Recorded at or after.', INSTANT), query('until', 'Recorded before.', INSTANT), ...PAGING],
    success: { status: 200, description: 'A page of erasure requests.', content: json(listBody('ErasureRow')) },
    outcomes: ['INVALID_INPUT', ...KEYED_ERRORS],
  },
  {
    method: 'get',
    path: '/functions/erasures/:erasure_id',
    tag: 'Personal data',
    summary: 'An erasure',
    description:
      'The erasure as recorded: every request that erased something, the leads erased, whether the contacts are suppressed. ' +
      'Its `as_of` is the look recorded last, made before the leads it found were erased: at or before the `as_of` the answer of that request gave, which is where the request\'s final look, finding nothing new, stopped.',
    roles: ['admin'],
    parameters: [{ name: 'erasure_id', in: 'path', required: true, schema: { type: 'string', pattern: '^[0-9a-f]{32}$' } }],
    success: { status: 200, description: 'The erasure.', content: json(schema('ErasureAnswer')) },
    outcomes: ['NOT_FOUND', ...KEYED_ERRORS],
  },
  {
    method: 'post',
    path: '/functions/consumers/lookup',
    tag: 'Personal data',
    summary: "A consumer's leads (access request)",
    description:
      'Every lead recorded with the consumer\'s e-mail or mobile (normalised as a posted lead\'s), oldest first, each as the lead view with its personal data opened and its outcome: the answer to a consumer\'s request to know what is kept. ' +
      'An erased lead is listed with `lead.erased: true` and no personal field. ' +
      'The contacts go in the body, so no proxy, load balancer or access log in front of the service records them with the URL.',
    roles: ['admin'],
    body: { schema: 'ConsumerLookup', example: { email: 'ada@example.com', mobile: '2025550143' } },
    success: { status: 200, description: 'The consumer\'s leads.', content: json(CONSUMER_LEADS) },
    outcomes: ['INVALID_INPUT', 'MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', 'PAYLOAD_TOO_LARGE', ...KEYED_ERRORS],
  },
  {
    method: 'get',
    path: '/functions/consumers',
    tag: 'Personal data',
    summary: "A consumer's leads, asked in the query string (use POST /functions/consumers/lookup)",
    description:
      'The same answer as `POST /functions/consumers/lookup`, kept for the clients that already use it. ' +
      'The consumer\'s e-mail and mobile are in the URL here, where proxies and access logs in front of the service write them down: use the POST form.',
    roles: ['admin'],
    deprecated: true,
    parameters: [
      query('email', 'The consumer\'s e-mail.', CONSUMER_EMAIL),
      query('mobile', 'The consumer\'s mobile, in any form; at least one of email and mobile.', { type: 'string' }),
    ],
    success: { status: 200, description: 'The consumer\'s leads.', content: json(CONSUMER_LEADS) },
    outcomes: ['INVALID_INPUT', ...KEYED_ERRORS],
  },
  {
    method: 'get',
    path: '/functions/me',
    tag: 'Read-back',
    summary: 'Who this key is',
    description:
      'The key\'s role, principal name and key id; for a buyer key also its terms from the routing file in force: return reasons, return window and how it takes delivery (pull or webhook), ' +
      'nothing secret (no URL, no secret). The console uses it to show the pages a role has; it grants nothing, every route checks the key itself.',
    roles: ['supplier', 'buyer', 'analyst', 'admin'],
    success: {
      status: 200,
      description: 'The key\'s principal.',
      content: json({
        type: 'object',
        required: ['ok', 'trace_id', 'code', 'message', 'role', 'name', 'key_id'],
        properties: {
          ok: { const: true },
          trace_id: { type: 'string' },
          code: { const: 'OK' },
          message: { type: 'string' },
          role: { type: 'string', enum: ['supplier', 'buyer', 'analyst', 'admin'] },
          name: { type: 'string', description: 'The supplier, buyer or person the key acts for.' },
          key_id: { type: 'string' },
          buyer: {
            type: ['object', 'null'],
            description: 'Buyer keys only: the buyer in the routing file in force (null when the file no longer names it).',
            required: ['id', 'return_reasons', 'return_window_days', 'delivery'],
            properties: {
              id: { type: 'string' },
              return_reasons: { type: 'array', items: { type: 'string' } },
              return_window_days: { type: 'integer', minimum: 0 },
              delivery: { type: 'string', enum: ['pull', 'webhook'] },
            },
          },
        },
      }),
    },
    outcomes: ['UNAUTHORIZED', 'RATE_LIMITED', 'UNAVAILABLE'],
  },
  {
    method: 'get',
    path: '/healthz',
    tag: 'Operations',
    summary: 'Liveness',
    description: 'The process is up and answering. Checks nothing else, so a restart is never triggered by a slow store.',
    success: { status: 200, description: 'Up.', content: json(schema('Health')) },
    outcomes: [],
  },
  {
    method: 'get',
    path: '/readyz',
    tag: 'Operations',
    summary: 'Readiness',
    description:
      'Ready to take traffic: the event store, read-model store and key store answer, every projection runs within READY_MAX_LAG_SECONDS of the newest event, and the instance is not shutting down. ' +
      "Its own appends count too: when every append it made has failed for READY_APPEND_FAILURE_SECONDS (at least 3 of them, none succeeding), the event store is not ready although it still answers reads; after as long again with no failed append the instance reports ready, and the posts it is then sent are the trial. " +
      "A projection's lag counts only on the instance that runs it (holds its lease, projector-leads-v4 and so on), or on one with the projector role while that lease is free; others report it without turning unready. " +
      'checks.roles says which roles the process runs and, per lease, whether it holds it or who does. ' +
      'When not ready: 503 UNAVAILABLE, the message naming each failing check.',
    success: { status: 200, description: 'Ready.', content: json(schema('Readiness')) },
    outcomes: ['UNAVAILABLE'],
  },
  {
    method: 'get',
    path: '/metrics',
    tag: 'Operations',
    summary: 'Prometheus metrics',
    description:
      'Request latency by route template and status, lead posts by outcome code, event-store appends, projection lag, webhook delivery attempts, requests to buyers sent again after a closed connection, ping bids by result, lead checks by result, and process metrics. ' +
      'Labels are route templates, codes and projection names only: no URL, key, principal or consumer data.',
    success: { status: 200, description: 'Prometheus text format.', content: { 'text/plain': { schema: { type: 'string' }, example: 'leadpost_lead_posts_total{code="SOLD",replayed="false"} 42\n' } } },
    outcomes: [],
  },
  {
    method: 'get',
    path: '/docs',
    tag: 'Operations',
    summary: 'This reference, as a page',
    description: 'Rendered in the browser by Swagger UI, served by the service itself (no CDN).',
    success: { status: 200, description: 'HTML.', content: { 'text/html': { schema: { type: 'string' } } } },
    outcomes: [],
  },
  {
    method: 'get',
    path: '/console',
    tag: 'Operations',
    summary: 'The web console',
    description:
      'A page for people: reports as charts and a table with CSV download, deliveries, a lead\'s timeline from its events, readiness. ' +
      'Sign-in is an API key, kept in the browser tab\'s session storage and sent as X-API-KEY to the routes above: the console adds no authority. Served by the service itself (no CDN). ' +
      'The page and its files are sent gzipped to a client whose Accept-Encoding takes gzip (Vary: Accept-Encoding), with Cache-Control: no-cache and an ETag per encoding (304 while unchanged).',
    parameters: [{ name: 'If-None-Match', in: 'header', required: false, description: 'The ETag of the page as last sent: 304 while it is unchanged.', schema: { type: 'string' } }],
    success: { status: 200, description: 'HTML.', content: { 'text/html': { schema: { type: 'string' } } }, headers: ['ETag'] },
    // What a browser asks each time (no-cache): the copy it has is still the page.
    alsoSuccess: [{ status: 304, description: 'Not modified: If-None-Match named the ETag of the page as it is, in the encoding asked for; no body.', content: {}, headers: ['ETag'] }],
    outcomes: [],
  },
  {
    method: 'get',
    path: '/docs/openapi.json',
    tag: 'Operations',
    summary: 'This reference, as OpenAPI 3.1',
    description: 'Generated from the schemas the routes validate with.',
    success: { status: 200, description: 'The OpenAPI document.', content: json({ type: 'object' }) },
    outcomes: [],
  },
];

/** Routes of the router that are not API: the script and style files of the docs page and the console. */
export const UNDOCUMENTED_ROUTES: ReadonlyArray<{ readonly method: Method; readonly path: string }> = [
  { method: 'get', path: '/docs/assets/:file' },
  { method: 'get', path: '/console/:file' },
];
