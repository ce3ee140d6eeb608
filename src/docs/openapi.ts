// The OpenAPI 3.1 document served at /docs/openapi.json. Field rules come from the ajv schemas the
// routes validate with (LEAD_SCHEMA, FEEDBACK_SCHEMA) and the read-back code's own lists; codes
// and statuses from the OUTCOMES table; examples from the code that builds real responses. What
// is written by hand is prose (here) and which route can answer which code (route-docs.ts). The
// docs tests check that every route of the router is here and every outcome code has its status
// and example.

import { readFileSync } from 'node:fs';
import { FEEDBACK_SCHEMA } from '../commands/after-sale.js';
import { REDELIVERY_SCHEMA } from '../delivery/redeliver.js';
import { MAX_HEADER_BYTES } from '../http/client-error.js';
import { OUTCOMES } from '../http/envelope.js';
import { CONSUMER_LOOKUP_SCHEMA } from '../http/erasure-routes.js';
import { PING_INVALID_MESSAGE } from '../http/ping-route.js';
import { MAY_BE_RECORDED_MESSAGE } from '../http/shell.js';
import { DEFAULT_PING_RATE_LIMIT, DEFAULT_RATE_LIMIT, DEFAULT_READ_RATE_LIMIT, DEFAULT_TIMEOUTS } from '../limits.js';
import { CERTIFICATE_URL_ALIAS, LEAD_SCHEMA, PING_SCHEMA } from '../leads/schema.js';
import { asPosted } from './posted.js';
import { ENVELOPE_SCHEMA, FIELD_ERROR_SCHEMA } from './envelope-schema.js';
import { EXAMPLE_LEAD, EXAMPLE_PING, type ExampleName, exampleEnvelopes } from './examples.js';
import { toOpenApiSchema } from './json-schema.js';
import {
  CONSUMER_FIELDS_SCHEMA,
  DELIVERY_ROW_SCHEMA,
  FEEDBACK_ROW_SCHEMA,
  LEAD_FEEDBACK_SCHEMA,
  LEAD_VIEW_SCHEMA,
  LEAD_EVENT_SCHEMA,
  POSITION_SCHEMA,
  READINESS_CHECKS_SCHEMA,
  REPORT_ROW_SCHEMA,
  ERASURE_ANSWER_SCHEMA,
  ERASURE_ROW_SCHEMA,
  ERASURE_REQUEST_SCHEMA,
} from './read-back-schemas.js';
import { type Json, ROUTE_DOCS, type RouteDoc, ref, schema } from './route-docs.js';
import { WEBHOOKS, WEBHOOK_SCHEMAS } from './webhooks.js';

export {  UNDOCUMENTED_ROUTES } from './route-docs.js';


const HEADERS: Readonly<Record<string, Json>> = {
  'X-Trace-Id': { description: 'The trace id of this request (32 hex), also in the body.', schema: { type: 'string' } },
  'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer' } },
  'RateLimit-Limit': { description: 'The key’s bucket size.', schema: { type: 'integer' } },
  'RateLimit-Remaining': { description: 'Requests left in the bucket.', schema: { type: 'integer' } },
  'RateLimit-Reset': { description: 'Seconds until the bucket is full again.', schema: { type: 'integer' } },
  Location: { description: 'Where the resource the request made or found can be read again.', schema: { type: 'string' } },
  'Idempotency-Replayed': { description: '`true` when this is the stored answer to an earlier request with the same Idempotency-Key.', schema: { type: 'string', enum: ['true'] } },
  'Content-Disposition': { description: 'For CSV: a file name with the report’s dates.', schema: { type: 'string' } },
  Allow: { description: 'The methods the path has.', schema: { type: 'string' } },
  ETag: { description: 'The file as sent, one per encoding: send it back in If-None-Match to get 304 while it is unchanged.', schema: { type: 'string' } },
};
const headerRef = (name: string) => ref('headers', name.replaceAll('-', ''));
/** Sent on every answer of a rate-limited route that got past authentication. */
const RATE_HEADERS = ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'] as const;

/** The HTTP status an example answers with. */
function exampleStatus(name: ExampleName): number {
  if (name === 'IDEMPOTENCY_CONFLICT_OTHER_BODY' || name === 'IDEMPOTENCY_CONFLICT_MALFORMED_KEY' || name === 'INVALID_INPUT' || name === 'PING_INVALID') return 422;
  if (name === 'HEADERS_TOO_LARGE') return 431;
  if (name === 'NOT_HTTP') return OUTCOMES.MALFORMED_JSON.status;
  if (name === 'UNAVAILABLE_MAY_BE_RECORDED') return OUTCOMES.UNAVAILABLE.status;
  return OUTCOMES[name].status;
}

/** Headers sent with an outcome besides X-Trace-Id. */
function outcomeHeaders(names: readonly ExampleName[], route: RouteDoc): string[] {
  const headers = new Set<string>();
  for (const name of names) {
    if (name === 'RATE_LIMITED') ['Retry-After', ...RATE_HEADERS].forEach((h) => headers.add(h));
    if (name === 'UNAVAILABLE' || name === 'UNAVAILABLE_MAY_BE_RECORDED' || name === 'IDEMPOTENCY_CONFLICT' || name === 'DUPLICATE_PENDING') headers.add('Retry-After');
    if (name === 'METHOD_NOT_ALLOWED') headers.add('Allow');
  }
  if (route.path === '/functions/leads' && names.some((n) => ['INVALID', 'VERIFICATION_FAILED', 'DUPLICATE', 'SUPPRESSED', 'IDEMPOTENCY_CONFLICT_OTHER_BODY'].includes(n))) {
    headers.add('Idempotency-Replayed');
  }
  return [...headers];
}

function describe(name: ExampleName): string {
  if (name === 'PING_INVALID') return `\`INVALID\` — ${PING_INVALID_MESSAGE} \`errors\` names each.`;
  if (name === 'IDEMPOTENCY_CONFLICT_OTHER_BODY') return '`IDEMPOTENCY_CONFLICT` — the Idempotency-Key was used before with another body.';
  if (name === 'IDEMPOTENCY_CONFLICT_MALFORMED_KEY') return '`IDEMPOTENCY_CONFLICT` — the Idempotency-Key is not 1–255 visible ASCII characters; nothing was recorded.';
  if (name === 'UNAVAILABLE_MAY_BE_RECORDED') {
    return `\`UNAVAILABLE\` — with EventStoreDB, a lead's append the server took and never answered (cut off, past its deadline or commit timeout): ${MAY_BE_RECORDED_MESSAGE} Its mobile and e-mail stay claimed until it is recorded or its claims lapse.`;
  }
  if (name === 'INVALID_INPUT') return '`INVALID` — a query parameter or body field breaks its rule; `errors` names each.';
  if (name === 'NOT_HTTP') return '`MALFORMED_JSON` — the request is not valid HTTP/1.1 (such as one without a `Host` header), whatever its route; the connection is closed.';
  if (name === 'HEADERS_TOO_LARGE') return `\`PAYLOAD_TOO_LARGE\` — the request headers are larger than ${MAX_HEADER_BYTES / 1024} KiB; the connection is closed.`;
  if (name === 'REQUEST_TIMEOUT') {
    return `\`REQUEST_TIMEOUT\` — ${OUTCOMES.REQUEST_TIMEOUT.message} The headers must arrive within HEADERS_TIMEOUT_MS, the whole request within REQUEST_TIMEOUT_MS; the connection is closed.`;
  }
  return `\`${name}\` — ${OUTCOMES[name].message}`;
}

function notReadyExample(envelope: unknown): Json {
  const check = (ok: boolean, detail: string) => ({ ok, detail });
  return {
    ...(envelope as Json),
    message: 'not ready: projections (behind by more than 30 s: leads 42.5 s)',
    checks: {
      shutdown: check(true, 'serving'),
      event_store: check(true, 'reachable'),
      read_models: check(true, 'reachable'),
      key_store: check(true, 'reachable'),
      projections: {
        ...check(false, 'behind by more than 30 s: leads 42.5 s'),
        items: [{ projection: 'leads', caught_up: false, events_behind: 5120, lag_seconds: 42.5 }],
      },
      roles: {
        ...check(true, 'api, projector (holds leads, deliveries; web-2:4242:9f3a1c holds feedback, reports), delivery (standby; web-2:4242:9f3a1c holds the lease)'),
        roles: ['api', 'projector', 'delivery'],
        leases: [
          { lease: 'projector-leads-v4', held: true, holder: 'web-1:3131:04be7d' },
          { lease: 'projector-deliveries-v3', held: true, holder: 'web-1:3131:04be7d' },
          { lease: 'projector-feedback-v1', held: false, holder: 'web-2:4242:9f3a1c' },
          { lease: 'projector-reports-v4', held: false, holder: 'web-2:4242:9f3a1c' },
          { lease: 'delivery', held: false, holder: 'web-2:4242:9f3a1c' },
        ],
      },
    },
  };
}

/**
 * What any request can be answered with, whatever its route: these are decided before a route is
 * known (a request that is not HTTP/1.1, such as one without Host, is refused before its route
 * runs), or by a bug.
 */
const EVERY_ROUTE: readonly ExampleName[] = ['HTTPS_REQUIRED', 'NOT_HTTP', 'REQUEST_TIMEOUT', 'HEADERS_TOO_LARGE', 'INTERNAL_ERROR'];

/** The code an example envelope shows (two example names are variants of one code). */
const exampleEnvelopeCode = (examples: Record<ExampleName, unknown>, name: ExampleName): string => String((examples[name] as Json).code);

/** An example as a route words it, where it has words of its own. */
const withMessage = (example: unknown, message: string | undefined): unknown => (message === undefined ? example : { ...(example as Json), message });

function errorResponses(route: RouteDoc, examples: Record<ExampleName, unknown>, body: Json): Record<string, Json> {
  const names: ExampleName[] = [...route.outcomes.filter((n) => exampleStatus(n) !== route.success.status), ...EVERY_ROUTE];
  const byStatus = new Map<number, ExampleName[]>();
  for (const name of names) byStatus.set(exampleStatus(name), [...(byStatus.get(exampleStatus(name)) ?? []), name]);
  const responses: Record<string, Json> = {};
  for (const [status, group] of [...byStatus].sort(([a], [b]) => a - b)) {
    const readiness = route.path === '/readyz' && status === 503;
    responses[String(status)] = {
      description: group.map((name) => (route.messages?.[name] ? `\`${exampleEnvelopeCode(examples, name)}\` — ${route.messages[name]}` : describe(name))).join('\n\n'),
      headers: Object.fromEntries(['X-Trace-Id', ...outcomeHeaders(group, route)].map((h) => [h, headerRef(h)])),
      content: {
        'application/json': {
          schema: readiness ? schema('NotReady') : body,
          examples: Object.fromEntries(group.map((name) => [name, { summary: name, value: readiness ? notReadyExample(examples[name]) : withMessage(examples[name], route.messages?.[name]) }])),
        },
      },
    };
  }
  return responses;
}

function operation(route: RouteDoc, examples: Record<ExampleName, unknown>): Json {
  const envelope = schema('DecisionEnvelope');
  const success = route.success;
  const successExamples = route.outcomes.filter((n) => exampleStatus(n) === success.status);
  const successContent = Object.fromEntries(
    Object.entries(success.content).map(([type, media]) => [
      type,
      type === 'application/json' && successExamples.length > 0
        ? { ...(media as Json), examples: Object.fromEntries(successExamples.map((n) => [n, { summary: n, value: examples[n] }])) }
        : media,
    ]),
  );
  // A rate-limited route sends its limit's headers on every answer past authentication.
  const limitHeaders = route.outcomes.includes('RATE_LIMITED') ? RATE_HEADERS : [];
  const successHeaders = (named: readonly string[] = []) => Object.fromEntries([...new Set(['X-Trace-Id', ...limitHeaders, ...named])].map((h) => [h, headerRef(h)]));
  const op: Json = {
    tags: [route.tag],
    summary: route.summary,
    description: route.roles ? `${route.description}\n\nKey roles: ${route.roles.join(', ')}.` : `${route.description}\n\nNo API key.`,
    operationId: `${route.method}${route.path.replace(/[/:]+(\w)/g, (_, c: string) => c.toUpperCase()).replace(/\W/g, '')}`,
    security: route.roles ? [{ apiKey: [] }] : [],
    parameters: [...(route.parameters ?? []), ref('parameters', 'Traceparent')],
    responses: {
      [String(success.status)]: {
        description: successExamples.length > 0 ? successExamples.map(describe).join('\n\n') : success.description,
        headers: successHeaders(success.headers),
        content: successContent,
      },
      ...Object.fromEntries(
        (route.alsoSuccess ?? []).map((also) => [
          String(also.status),
          // An answer without a body (304) has no content to describe.
          { description: also.description, headers: successHeaders(also.headers), ...(Object.keys(also.content).length > 0 ? { content: also.content } : {}) },
        ]),
      ),
      ...errorResponses(route, examples, envelope),
    },
  };
  if (route.deprecated) op.deprecated = true;
  if (route.body) {
    op.requestBody = { required: route.body.optional !== true, content: { 'application/json': { schema: schema(route.body.schema), example: route.body.example } } };
  }
  return op;
}

/**
 * The Lead schema as a supplier's validator or client generator reads it: the validator's own, and
 * the consent certificate's alias, which the validator folds into certificate_url before its rules
 * run (so LEAD_SCHEMA never names it). One of the two is required.
 */
function leadSchema(): Json {
  const lead = asPosted(toOpenApiSchema(LEAD_SCHEMA));
  const properties = lead.properties as Record<string, Json>;
  const alias = {
    ...properties.certificate_url,
    description: `Alias of certificate_url (TrustedForm's own field name): send either; both only with the same value, else INVALID (conflicting_alias).`,
  };
  return {
    ...lead,
    required: LEAD_SCHEMA.required.filter((field) => field !== 'certificate_url'),
    anyOf: [{ required: ['certificate_url'] }, { required: [CERTIFICATE_URL_ALIAS] }],
    properties: { ...properties, [CERTIFICATE_URL_ALIAS]: alias },
    example: EXAMPLE_LEAD,
  };
}

/** `/functions/leads/:lead_id` → `/functions/leads/{lead_id}` */
export const openApiPath = (routerPath: string): string => routerPath.replace(/:(\w+)/g, '{$1}');

function outcomeTable(): string {
  const rows = Object.entries(OUTCOMES).map(([code, o]) => {
    const status = code === 'IDEMPOTENCY_CONFLICT' ? '409 / 422' : code === 'PAYLOAD_TOO_LARGE' ? '413 / 431' : String(o.status);
    const response = code === 'IDEMPOTENCY_CONFLICT' ? 'Error / Failure' : { accepted: 'Success', rejected: 'Failure', error: 'Error' }[o.acceptance];
    return `| \`${code}\` | ${status} | ${response} | ${o.message} |`;
  });
  return ['| code | HTTP | Response | meaning |', '|---|---|---|---|', ...rows].join('\n');
}

const rate = (limit: { ratePerSecond: number; burst: number }) => `${limit.ratePerSecond}/s with bursts of ${limit.burst}`;

const INTRODUCTION = `Suppliers post consumer leads and get the decision — accepted or not, sold or not, for how much — in the same response.

**Authentication.** Every \`/functions\` route takes an API key in \`X-API-KEY\`; its role (supplier, buyer, analyst, admin) decides what it may do. An operator creates keys with \`leadpost keys create\`. Only HTTPS is served: a plain-HTTP request gets \`403 HTTPS_REQUIRED\`.

**Every answer** is JSON with \`ok\`, \`trace_id\`, \`code\` and \`message\` at the top. A lead post answers with the decision envelope (all eleven fields, always); \`Response\` says what to do next: \`Success\` done, \`Failure\` fix the request (the same one fails again), \`Error\` retry later, honouring \`Retry-After\`.

**Tracing.** Send a W3C \`traceparent\` and its trace id becomes \`trace_id\`; else one is generated. Either way it is in the \`X-Trace-Id\` header.

**Retries.** A post with an \`Idempotency-Key\` (per supplier, kept 72 h) can be retried safely: the same key and body return the original status and body with \`Idempotency-Replayed: true\`.

**Buyers' endpoints.** What the service sends to a buyer — a sold lead, the \`lead.erased\` notice, a ping to bid on — is under *Webhooks*: each body, its headers, how to check its signature, and what each answer leads to.

**Read-back** answers are eventually consistent (usually within tens of milliseconds) and carry the \`position\` in the event log they reflect. Lists are newest first (a report: in the order of its group key); pass \`next_cursor\` back as \`cursor\`.

**Limits.** Each is set by the operator; the defaults are given.

- Rate, per API key, token buckets on every keyed route: lead posts and the other writes (acknowledgements, feedback, erasures, redeliveries) ${rate(DEFAULT_RATE_LIMIT)} (\`RATE_LIMIT_PER_SECOND\`, \`RATE_LIMIT_BURST\`); read-back requests (the \`GET\` routes under \`/functions\`, and the consumer look-up) ${rate(DEFAULT_READ_RATE_LIMIT)} (\`READ_RATE_LIMIT_PER_SECOND\`, \`READ_RATE_LIMIT_BURST\`) and pings ${rate(DEFAULT_PING_RATE_LIMIT)} (\`PING_RATE_LIMIT_PER_SECOND\`, \`PING_RATE_LIMIT_BURST\`), each counted apart, so reading never uses up posting. Over a limit: \`429 RATE_LIMITED\` with \`Retry-After\` and \`RateLimit-*\`; every limited answer carries \`RateLimit-*\`. The limits are per instance of the service.
- Body: 64 KiB (\`BODY_LIMIT_BYTES\`); beyond, \`413 PAYLOAD_TOO_LARGE\`. Request headers: ${MAX_HEADER_BYTES / 1024} KiB; beyond, \`431\` with the code \`PAYLOAD_TOO_LARGE\`.
- Time: all headers within ${DEFAULT_TIMEOUTS.headersMs / 1000} s (\`HEADERS_TIMEOUT_MS\`), the whole request within ${DEFAULT_TIMEOUTS.requestMs / 1000} s (\`REQUEST_TIMEOUT_MS\`); else \`408 REQUEST_TIMEOUT\` (\`Response: Error\`: sent in time, the same request may succeed) and the connection is closed.

**Other paths and methods.** Two answers belong to no operation below, since they answer a request for none: an unknown path is \`404 NOT_FOUND\`, and a path below asked with a method it does not have is \`405 METHOD_NOT_ALLOWED\`, its \`Allow\` header naming the methods the path has (those given for it below, and \`HEAD\` wherever there is \`GET\`). Each is described once, as a shared response: \`#/components/responses/NotFound\` and \`#/components/responses/MethodNotAllowed\`.

## Outcome codes

`;

function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version?: string };
  return pkg.version ?? '0.0.0';
}

let built: Promise<Json> | undefined;

/** The document; built once per process (it depends only on the code). */
export function openApiDocument(): Promise<Json> {
  built ??= buildOpenApiDocument();
  return built;
}

async function buildOpenApiDocument(): Promise<Json> {
  const examples = await exampleEnvelopes();
  const paths: Record<string, Json> = {};
  for (const route of ROUTE_DOCS) {
    const path = openApiPath(route.path);
    paths[path] = { ...paths[path], [route.method]: operation(route, examples) };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'leadpost',
      version: packageVersion(),
      description: INTRODUCTION + outcomeTable(),
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [{ url: '/' }],
    tags: [
      { name: 'Suppliers', description: 'Posting leads.' },
      { name: 'Read-back', description: 'Leads, deliveries, feedback and reports.' },
      { name: 'Buyers', description: 'Pull delivery and feedback, and an admin sending a failed delivery again; and, under Webhooks, what a webhook buyer or bidder is sent.' },
      { name: 'Personal data', description: "A consumer's erasure and access requests, answered by an admin." },
      { name: 'Operations', description: 'Health, readiness, metrics and these docs; no API key.' },
    ],
    paths,
    webhooks: WEBHOOKS,
    components: {
      securitySchemes: { apiKey: { type: 'apiKey', in: 'header', name: 'X-API-KEY', description: 'lp_… as printed once by `leadpost keys create`.' } },
      parameters: {
        IdempotencyKey: {
          name: 'Idempotency-Key', in: 'header', required: false,
          description: 'Makes a retry safe: 1–255 visible ASCII characters, per supplier, kept 72 h.',
          schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7e]+$' },
        },
        Traceparent: {
          name: 'traceparent', in: 'header', required: false,
          description: 'W3C Trace Context; its trace id becomes trace_id.',
          schema: { type: 'string', pattern: '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$' },
        },
      },
      headers: Object.fromEntries(Object.entries(HEADERS).map(([name, header]) => [name.replaceAll('-', ''), header])),
      responses: {
        NotFound: {
          description: `${describe('NOT_FOUND')} Any path not above (a route that can answer 404 for a path above lists it itself).`,
          headers: { 'X-Trace-Id': headerRef('X-Trace-Id') },
          content: { 'application/json': { schema: schema('DecisionEnvelope'), examples: { NOT_FOUND: { summary: 'NOT_FOUND', value: examples.NOT_FOUND } } } },
        },
        MethodNotAllowed: {
          description: `${describe('METHOD_NOT_ALLOWED')} Any path above, asked with a method it does not have; \`Allow\` names the methods the path has: those documented for it, and HEAD wherever GET is.`,
          headers: { 'X-Trace-Id': headerRef('X-Trace-Id'), Allow: headerRef('Allow') },
          content: { 'application/json': { schema: schema('DecisionEnvelope'), examples: { METHOD_NOT_ALLOWED: { summary: 'METHOD_NOT_ALLOWED', value: examples.METHOD_NOT_ALLOWED } } } },
        },
      },
      schemas: {
        Lead: leadSchema(),
        Ping: { ...asPosted(toOpenApiSchema(PING_SCHEMA)), example: EXAMPLE_PING },
        Feedback: toOpenApiSchema(FEEDBACK_SCHEMA),
        Redelivery: toOpenApiSchema(REDELIVERY_SCHEMA),
        DecisionEnvelope: toOpenApiSchema(ENVELOPE_SCHEMA),
        FieldError: toOpenApiSchema(FIELD_ERROR_SCHEMA),
        Position: POSITION_SCHEMA,
        LeadView: LEAD_VIEW_SCHEMA,
        ConsumerFields: CONSUMER_FIELDS_SCHEMA,
        LeadEvent: LEAD_EVENT_SCHEMA,
        DeliveryRow: DELIVERY_ROW_SCHEMA,
        FeedbackRow: FEEDBACK_ROW_SCHEMA,
        LeadFeedback: LEAD_FEEDBACK_SCHEMA,
        ReportRow: REPORT_ROW_SCHEMA,
        ErasureRequest: ERASURE_REQUEST_SCHEMA,
        ConsumerLookup: toOpenApiSchema(CONSUMER_LOOKUP_SCHEMA),
        ErasureAnswer: ERASURE_ANSWER_SCHEMA,
        ErasureRow: ERASURE_ROW_SCHEMA,
        Health: {
          type: 'object',
          required: ['ok', 'trace_id', 'code', 'message'],
          properties: { ok: { const: true }, trace_id: { type: 'string' }, code: { const: 'OK' }, message: { type: 'string' } },
        },
        Readiness: {
          type: 'object',
          required: ['ok', 'trace_id', 'code', 'message', 'checks'],
          properties: { ok: { const: true }, trace_id: { type: 'string' }, code: { const: 'OK' }, message: { type: 'string' }, checks: schema('ReadinessChecks') },
        },
        NotReady: { allOf: [schema('DecisionEnvelopeOpen'), { type: 'object', required: ['checks'], properties: { checks: schema('ReadinessChecks') } }] },
        DecisionEnvelopeOpen: { ...toOpenApiSchema(ENVELOPE_SCHEMA), additionalProperties: true, description: 'The decision envelope with fields of the route added (readiness checks).' },
        ReadinessChecks: READINESS_CHECKS_SCHEMA,
        ...WEBHOOK_SCHEMAS,
      },
    },
  };
}
