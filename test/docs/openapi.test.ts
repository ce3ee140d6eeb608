import { expect } from 'chai';
import { Writable } from 'node:stream';
import { FEEDBACK_SCHEMA } from '../../src/commands/after-sale.js';
import { EXAMPLE_INVALID_LEAD, EXAMPLE_LEAD, type ExampleName } from '../../src/docs/examples.js';
import { toOpenApiSchema, UndocumentableSchemaError } from '../../src/docs/json-schema.js';
import { openApiDocument, openApiPath, UNDOCUMENTED_ROUTES } from '../../src/docs/openapi.js';
import type { EventStore } from '../../src/event-store/port.js';
import { createApp } from '../../src/http/app.js';
import { OUTCOMES } from '../../src/http/envelope.js';
import { createLogger } from '../../src/http/logger.js';
import { LEAD_SCHEMA } from '../../src/leads/schema.js';
import { createLeadValidator, normaliseConsumer } from '../../src/leads/validate.js';
import { ServiceMetrics } from '../../src/ops/metrics.js';
import { ReadinessProbe } from '../../src/ops/readiness.js';
import { ShutdownFlag } from '../../src/ops/shutdown-flag.js';
import { ReadBack } from '../../src/read-models/read-back.js';
import { DocumentReader, exampleCode, routerOf, routesOf } from '../support/openapi.js';

type Json = Record<string, any>;

/** An app with every optional part, so that its router has every route the service can serve. */
function fullApp() {
  const unused = (): never => {
    throw new Error('not called');
  };
  return createApp({
    authenticate: () => null,
    postLead: unused,
    ping: unused,
    logger: createLogger({ level: 'silent', destination: new Writable({ write: (_c, _e, done) => done() }) }),
    currency: () => 'USD',
    readBack: new ReadBack({ events: {} as EventStore, personalData: {} as never, readModels: {} as never, collection: unused, position: unused, routing: unused }),
    afterSale: { events: {} as EventStore, routing: unused, now: () => new Date() },
    erasure: { eraser: {} as never, leadIdsOf: unused },
    ops: {
      readiness: new ReadinessProbe({ events: {} as EventStore, readModels: {} as never, keyStore: {} as never, projections: unused, maxLagSeconds: 30, shuttingDown: () => false }),
      metrics: new ServiceMetrics({ runtime: false }),
      shutdown: new ShutdownFlag(),
    },
  });
}

describe('OpenAPI document', function () {
  let doc: Json;
  let reader: DocumentReader;
  before(async () => {
    doc = await openApiDocument();
    reader = new DocumentReader(doc);
  });

  it('is OpenAPI 3.1.0 and documents every route of the router, and no route it lacks', function () {
    expect(doc.openapi).to.equal('3.1.0');
    expect(doc.info.title).to.equal('leadpost');
    const undocumented = new Set(UNDOCUMENTED_ROUTES.map((r) => `${r.method.toUpperCase()} ${r.path}`));
    const served = routesOf(routerOf(fullApp() as never))
      .filter((route) => !undocumented.has(route))
      .map((route) => {
        const [method, path] = route.split(' ') as [string, string];
        return `${method} ${openApiPath(path)}`;
      })
      .sort();
    const documented = Object.entries(doc.paths as Json)
      .flatMap(([path, item]) => Object.keys(item as Json).map((method) => `${method.toUpperCase()} ${path}`))
      .sort();
    expect(documented).to.deep.equal(served);
  });

  it('every outcome code is documented with its HTTP status and an example envelope that fits the envelope schema', function () {
    const found = new Map<string, Set<number>>();
    let checked = 0;
    const esc = (part: string) => part.replaceAll('~', '~0').replaceAll('/', '~1');
    const visit = (pointer: string, status: number, response: Json) => {
      const media = response.content?.['application/json'];
      const fits = media ? reader.compile(`${pointer}/content/application~1json/schema`) : undefined;
      for (const [name, example] of Object.entries((media?.examples ?? {}) as Json)) {
        const value = (example as { value: Json }).value;
        expect(value.code, `${pointer}: example ${name}`).to.equal(exampleCode(name as ExampleName));
        if (!(value.code in OUTCOMES)) continue;
        found.set(value.code, new Set([...(found.get(value.code) ?? []), status]));
        expect(fits!(value), `${pointer} ${name}: ${JSON.stringify(fits!.errors)}`).to.equal(true);
        checked += 1;
      }
    };
    for (const [path, item] of Object.entries(doc.paths as Json)) {
      for (const [method, operation] of Object.entries(item as Json)) {
        for (const [status, response] of Object.entries((operation as Json).responses as Json)) {
          visit(`#/paths/${esc(path)}/${method}/responses/${status}`, Number(status), response as Json);
        }
      }
    }
    for (const [name, response] of Object.entries(doc.components.responses as Json)) {
      visit(`#/components/responses/${name}`, { NotFound: 404, MethodNotAllowed: 405 }[name]!, response as Json);
    }
    for (const [code, outcome] of Object.entries(OUTCOMES)) {
      const expected = code === 'IDEMPOTENCY_CONFLICT' ? [409, 422] : code === 'PAYLOAD_TOO_LARGE' ? [413, 431] : [outcome.status];
      expect([...(found.get(code) ?? [])].sort(), code).to.deep.equal(expected);
    }
    expect(checked).to.be.greaterThan(Object.keys(OUTCOMES).length);
  });

  it('every route lists 400 for a request that is not HTTP/1.1, 408 REQUEST_TIMEOUT and 431; every route the rate limit guards lists 429 RATE_LIMITED with Retry-After', function () {
    const exampleCodes = (response: Json | undefined) => Object.values((response?.content?.['application/json']?.examples ?? {}) as Json).map((e) => (e as Json).value.code);
    const problems: string[] = [];
    for (const [path, item] of Object.entries(doc.paths as Json)) {
      for (const [method, operation] of Object.entries(item as Json)) {
        const responses = (operation as Json).responses as Json;
        const where = `${method.toUpperCase()} ${path}`;
        if (!exampleCodes(responses['400']).includes('MALFORMED_JSON')) problems.push(`${where}: no 400 MALFORMED_JSON`);
        if (!exampleCodes(responses['408']).includes('REQUEST_TIMEOUT')) problems.push(`${where}: no 408 REQUEST_TIMEOUT`);
        if (!exampleCodes(responses['431']).includes('PAYLOAD_TOO_LARGE')) problems.push(`${where}: no 431 PAYLOAD_TOO_LARGE`);
      }
    }
    // The guarded routes are read off the router: a route that gains the rate limit must document it.
    const router = routerOf(fullApp() as never);
    const guarded = router.stack
      .filter((layer) => layer.stack.some((middleware) => middleware.name === 'rateLimited'))
      .flatMap((layer) => layer.methods.filter((m) => m !== 'HEAD').map((m) => [m.toLowerCase(), openApiPath(String(layer.path))] as const));
    // Every route that takes a key is limited per key: a runaway or stolen key floods none of them.
    const keyed = Object.entries(doc.paths as Json).flatMap(([path, item]) =>
      Object.entries(item as Json)
        .filter(([, operation]) => ((operation as Json).security as unknown[]).length > 0)
        .map(([method]) => `${method} ${path}`),
    );
    expect(guarded.map(([m, p]) => `${m} ${p}`).sort()).to.deep.equal(keyed.sort());
    expect(keyed).to.include.members(['post /functions/deliveries/{lead_id}/ack', 'post /functions/leads/{lead_id}/feedback', 'post /functions/erasures', 'get /functions/me']);
    for (const [method, path] of guarded) {
      const limited = (doc.paths as Json)[path]?.[method]?.responses?.['429'] as Json | undefined;
      if (!exampleCodes(limited).includes('RATE_LIMITED')) problems.push(`${method.toUpperCase()} ${path}: no 429 RATE_LIMITED`);
      else if (!Object.keys(limited!.headers).includes('Retry-After')) problems.push(`${method.toUpperCase()} ${path}: 429 without Retry-After`);
    }
    expect(problems).to.deep.equal([]);
  });

  it('the introduction states the rate limits (posts and reads, defaults and variables), the size limits and the timeouts', function () {
    const text = doc.info.description as string;
    for (const phrase of [
      'RATE_LIMIT_PER_SECOND', 'RATE_LIMIT_BURST', '50/s with bursts of 100',
      'READ_RATE_LIMIT_PER_SECOND', 'READ_RATE_LIMIT_BURST', '20/s with bursts of 40',
      'BODY_LIMIT_BYTES', '413 PAYLOAD_TOO_LARGE', '16 KiB', '`431`',
      'HEADERS_TIMEOUT_MS', 'REQUEST_TIMEOUT_MS', '408 REQUEST_TIMEOUT', '`429 RATE_LIMITED`',
    ]) {
      expect(text, phrase).to.contain(phrase);
    }
    expect(text).to.match(/\| `REQUEST_TIMEOUT` \| 408 \| Error \|/);
    expect(text).to.match(/\| `PAYLOAD_TOO_LARGE` \| 413 \/ 431 \| Failure \|/);
  });

  it('every $ref resolves and every schema compiles as JSON Schema 2020-12', function () {
    const refs = new Set<string>();
    const walk = (node: unknown): void => {
      if (Array.isArray(node)) node.forEach(walk);
      else if (node && typeof node === 'object') {
        for (const [key, value] of Object.entries(node)) {
          if (key === '$ref' && typeof value === 'string') refs.add(value);
          else walk(value);
        }
      }
    };
    walk(doc);
    for (const ref of refs) {
      expect(ref, ref).to.match(/^#\/components\//);
      const target = ref.slice(2).split('/').reduce<any>((node, part) => node?.[part], doc);
      expect(target, `${ref} resolves`).to.be.an('object');
    }
    for (const name of Object.keys(doc.components.schemas as Json)) reader.compile(`#/components/schemas/${name}`);
  });

  it('the Lead and Ping schemas take what the service takes, as posted (blanks, any case, a state\'s name), and refuse what it refuses', async function () {
    const lead = reader.compile('#/components/schemas/Lead');
    const ping = reader.compile('#/components/schemas/Ping');
    const validate = createLeadValidator();
    const takes = [
      { accident_state: 'ca' },
      { accident_state: 'california' },
      { accident_state: '  New   york ' },
      { accident_state: 'U.S. Virgin Islands' },
      { zip: ' 90210 ' },
      { first_name: ' Ada  Mary ', last_name: 'Lovelace ' },
      { last_name: 'O\u2019Brien' },
      { first_name: "D'Angelo", last_name: 'St. John-Smith' },
      { accident_state: '\u00a0Nevada\u2003' },
      { sid: ' google-ads' },
      { ping_id: '3F9C2A1E-0B7D-4C2E-9A51-6D0F8E4B2C17' },
      // Lengths and formats are the validator's once trimmed: blanks around a value at its limit,
      // and around an address or URL, are what the normalising is there for.
      { first_name: `  ${'A'.repeat(24)}   ${'B'.repeat(23)}  ` },
      { email: ' Ada.Lovelace@Outlook.com ' },
      { mobile: `+1 213 555 0143${' '.repeat(20)}` },
      { certificate_url: `${EXAMPLE_LEAD.certificate_url} ` },
      { s1: `  ${'x'.repeat(255)}` },
      { s1: '   ' },
    ];
    for (const change of takes) {
      const body = { ...EXAMPLE_LEAD, ...change };
      expect((await validate(body)).ok, `the service takes ${JSON.stringify(change)}`).to.equal(true);
      expect(lead(body), `the Lead schema takes ${JSON.stringify(change)}: ${JSON.stringify(lead.errors)}`).to.equal(true);
    }
    expect(ping({ zip: '90210', accident_state: 'ca', sid: 'x', s1: `  ${'x'.repeat(255)}\t` }), JSON.stringify(ping.errors)).to.equal(true);
    // Refused where the rule as posted is exact: a length once trimmed, an address without one @.
    const refuses = [
      { accident_state: 'Atlantis' }, { accident_state: 'C A' }, { zip: '9021' }, { first_name: 'Ada1' }, { sid: 'a b' }, { ping_id: 'not-a-uuid' },
      { s1: ` ${'x'.repeat(256)} ` }, { s1: ' x\ud800 ' }, { mobile: ` +1 ${'2'.repeat(30)} ` }, { email: ' ada.lovelace.outlook.com ' }, { email: 'ada@outlook.com x@y.com' },
      { certificate_url: ` ${EXAMPLE_LEAD.certificate_url}?${'q'.repeat(2000)} ` }, { first_name: '  ' },
      { first_name: ' . ' }, { last_name: '-  -' }, { last_name: '\u0301' }, { accident_state: '\u0131d' }, { accident_state: '\u212Aansas' },
    ];
    for (const change of refuses) {
      const body = { ...EXAMPLE_LEAD, ...change };
      expect((await validate(body)).ok, `the service refuses ${JSON.stringify(change)}`).to.equal(false);
      expect(lead(body), `the Lead schema refuses ${JSON.stringify(change)}`).to.equal(false);
    }
  });

  it("an erasure and the query-string look-up take a consumer's e-mail as the service does: blanks around, any case, empty or null left out", function () {
    const erasure = reader.compile('#/components/schemas/ErasureRequest');
    const parameters = doc.paths['/functions/consumers'].get.parameters as Json[];
    const index = parameters.findIndex((p) => p.name === 'email');
    const queried = reader.compile(`#/paths/~1functions~1consumers/get/parameters/${index}/schema`);
    // A format is judged on the value with its blanks, which the service trims first: none is published.
    expect(doc.components.schemas.ErasureRequest.properties.email).to.not.have.property('format');
    expect(parameters[index]!.schema).to.not.have.property('format');
    for (const body of [{ email: ' Ada.Lovelace@Outlook.com ' }, { email: '', mobile: '2025550143' }, { email: null, mobile: '2025550143' }, { email: 'ada@outlook.com', mobile: null }]) {
      expect(normaliseConsumer(body).ok, `the service takes ${JSON.stringify(body)}`).to.equal(true);
      expect(erasure(body), `ErasureRequest takes ${JSON.stringify(body)}: ${JSON.stringify(erasure.errors)}`).to.equal(true);
      if (typeof body.email === 'string') expect(queried(body.email), `?email=${body.email}`).to.equal(true);
    }
    for (const email of ['ada.outlook.com', ' ada@outlook.com x@y.com', '   ', `${'a'.repeat(65)}@outlook.com`]) {
      expect(normaliseConsumer({ email }).ok, `the service refuses ${email}`).to.equal(false);
      expect(erasure({ email }), `ErasureRequest refuses ${email}`).to.equal(false);
      expect(queried(email), `?email=${email}`).to.equal(false);
    }
  });

  it('field rules are the ones the routes validate with: the Lead and Feedback schemas come from LEAD_SCHEMA and FEEDBACK_SCHEMA', function () {
    const lead = doc.components.schemas.Lead as Json;
    // The consent certificate's alias is the one field the validator folds away before its rules run.
    expect(lead.required).to.deep.equal(LEAD_SCHEMA.required.filter((field) => field !== 'certificate_url'));
    expect(lead.anyOf).to.deep.equal([{ required: ['certificate_url'] }, { required: ['xxTrustedFormCertUrl'] }]);
    expect(lead.additionalProperties).to.equal(false);
    expect(Object.keys(lead.properties)).to.deep.equal([...Object.keys(LEAD_SCHEMA.properties), 'xxTrustedFormCertUrl']);
    // Each rule as a client posts the field: the validator's, around the trimming and folding before it.
    expect(lead.properties.zip.pattern).to.equal(`^\\s*(?:${LEAD_SCHEMA.properties.zip.pattern.slice(1, -1)})\\s*$`);
    expect(lead.properties.sid.pattern).to.equal(`^\\s*(?:${LEAD_SCHEMA.properties.sid.pattern.slice(1, -1)})\\s*$`);
    expect(lead.properties.accident_state).to.not.have.property('enum');
    // No format or length is published where the service trims first: a validator would judge the
    // value with its blanks. The description says the rule in words.
    for (const field of ['first_name', 'email', 'mobile', 'certificate_url', 's1']) {
      expect(lead.properties[field], field).to.not.have.any.keys('format', 'maxLength');
    }
    expect(lead.properties.s1.description).to.contain('At most 255 characters once trimmed');
    expect(lead.properties.first_name.description).to.contain('At most 50 characters');
    expect(lead.properties.email.description).to.contain('at most 254 characters');
    expect(lead).to.not.have.property('$id');
    expect(doc.components.schemas.Feedback.properties.type.enum).to.deep.equal(FEEDBACK_SCHEMA.properties.type.enum);
    // The examples are what the validator says they are.
    const validate = createLeadValidator();
    expect(validate(EXAMPLE_LEAD).ok).to.equal(true);
    expect(validate(EXAMPLE_INVALID_LEAD).ok).to.equal(false);
    expect(doc.paths['/functions/leads'].post.requestBody.content['application/json'].example).to.deep.equal(EXAMPLE_LEAD);
  });

  it('an ajv format or keyword without an OpenAPI mapping stops the build instead of reaching the docs', function () {
    expect(() => toOpenApiSchema({ type: 'string', format: 'buyer-id' })).to.throw(UndocumentableSchemaError, "format 'buyer-id'");
    expect(() => toOpenApiSchema({ type: 'object', properties: { a: { type: 'string', transform: ['trim'] } } })).to.throw(
      UndocumentableSchemaError,
      "#/properties/a: keyword 'transform'",
    );
    expect(toOpenApiSchema({ $id: 'X', type: 'string', format: 'dialable-phone', maxLength: 3 })).to.deep.equal({ type: 'string', maxLength: 3 });
  });

  it('names every header: the key, Idempotency-Key, traceparent in; X-Trace-Id, Retry-After, RateLimit-*, Idempotency-Replayed, Allow out', function () {
    expect(doc.components.securitySchemes.apiKey).to.include({ type: 'apiKey', in: 'header', name: 'X-API-KEY' });
    expect(doc.components.parameters.IdempotencyKey).to.include({ name: 'Idempotency-Key', in: 'header' });
    expect(doc.components.parameters.Traceparent).to.include({ name: 'traceparent', in: 'header' });
    expect(Object.keys(doc.components.headers)).to.include.members(['XTraceId', 'RetryAfter', 'RateLimitLimit', 'RateLimitRemaining', 'RateLimitReset', 'IdempotencyReplayed', 'Allow']);
    const post = doc.paths['/functions/leads'].post;
    expect(post.security).to.deep.equal([{ apiKey: [] }]);
    expect(Object.keys(post.responses['429'].headers)).to.include.members(['Retry-After', 'X-Trace-Id']);
    expect(Object.keys(post.responses['201'].headers)).to.include.members(['Idempotency-Replayed', 'RateLimit-Remaining']);
    expect(doc.paths['/healthz'].get.security).to.deep.equal([]);
  });
});
