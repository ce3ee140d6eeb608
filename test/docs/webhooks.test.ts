import { expect } from 'chai';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { openApiDocument } from '../../src/docs/openapi.js';
import { BuyerEndpoint, type ReceivedDelivery } from '../delivery/buyer-endpoint.js';
import { until } from '../delivery/harness.js';
import { DocumentReader } from '../support/openapi.js';
import { TestService, validLead } from '../support/service.js';
import { unnamedFields } from './named-fields.js';

// The document's webhooks against what a real buyer endpoint receives: a buyer's engineer writes
// its endpoint from them alone, so every request it is sent must fit the documented body, carry
// the documented headers, and check out by the signature recipe as the document words it.

type Json = Record<string, any>;
const SECRET_ENV = 'DOCS_WEBHOOK_SECRET';
// Not ASCII, to hold the document to its word on how the key and the body become bytes.
const SECRET = 'whsec-docs-Ω-41';

/** The document's recipe: HMAC-SHA256 keyed by the secret's UTF-8 bytes over `<timestamp>.<raw body>`, `sha256=` and lower-case hex. */
function signedAsDocumented(request: ReceivedDelivery): boolean {
  const timestamp = String(request.headers['x-leadpost-timestamp']);
  const given = String(request.headers['x-leadpost-signature']);
  const expected = `sha256=${createHmac('sha256', Buffer.from(SECRET, 'utf8')).update(Buffer.concat([Buffer.from(`${timestamp}.`), Buffer.from(request.text, 'utf8')])).digest('hex')}`;
  return given.length === expected.length && timingSafeEqual(Buffer.from(given), Buffer.from(expected));
}

describe('OpenAPI webhooks against what a buyer endpoint receives', function () {
  this.timeout(60_000);
  let endpoint: BuyerEndpoint;
  let svc: TestService;
  let reader: DocumentReader;
  let first = true;

  before(async function () {
    process.env[SECRET_ENV] = SECRET;
    reader = new DocumentReader(await openApiDocument());
    // The first delivery is refused for a second, so that a retry is seen too.
    endpoint = await BuyerEndpoint.start((request) => {
      if (request.path === '/bid') return { status: 200, body: '{"bid": 37.5}' };
      if (request.body.type === undefined && first) {
        first = false;
        return { status: 503, headers: { 'retry-after': '1' } };
      }
      return 200;
    });
    const base = endpoint.url.replace(/\/leads$/, '');
    svc = await TestService.start({
      buyerCa: endpoint.cert,
      routing: {
        buyers: [{
          id: 'hook-law', price: 42.5,
          delivery: { kind: 'webhook', url: endpoint.url, timeout_ms: 2000, secret_env: SECRET_ENV },
          ping: { kind: 'webhook', url: `${base}/bid`, secret_env: SECRET_ENV },
        }],
      },
    });
    const supplier = { 'x-api-key': await svc.key('supplier', 'sup-1') };
    const admin = { 'x-api-key': await svc.key('admin', 'root') };
    const ping = await svc.post({ zip: '90210', accident_state: 'CA', sid: 'src-1', s1: 'click-9' }, supplier, '/functions/pings');
    expect(ping.body.code, ping.text).to.equal('BID');
    const erased = validLead({ first_name: 'Zoë', zip: '90210-1234' });
    const leads = [erased, validLead({ s1: undefined })];
    for (const lead of leads) expect((await svc.post(lead, supplier)).body.code).to.equal('SOLD');
    // The two leads' deliveries, one of them twice.
    const deliveries = () => endpoint.received.filter((r) => r.path === '/leads' && r.body.type === undefined);
    await until(() => deliveries().length >= 3, 20_000, () => `${deliveries().length} deliveries`);
    expect((await svc.post({ email: erased.email }, admin, '/functions/erasures')).status).to.equal(201);
    await until(() => endpoint.received.some((r) => r.body.type === 'lead.erased'), 20_000, () => 'a lead.erased notice');
  });
  after(async function () {
    await svc?.stop();
    await endpoint?.stop();
    delete process.env[SECRET_ENV];
  });

  /** The webhook a request is documented by: a bid request by its path, a notice by its type. */
  const webhookOf = (request: ReceivedDelivery) => (request.path === '/bid' ? 'bidRequest' : request.body.type === 'lead.erased' ? 'leadErased' : 'leadDelivery');
  const operation = (name: string): Json => (reader.doc as Json).webhooks[name].post;

  it('each kind of request a buyer is sent is documented under webhooks, and its body fits the schema with every field named', function () {
    expect(new Set(endpoint.received.map(webhookOf))).to.deep.equal(new Set(['bidRequest', 'leadDelivery', 'leadErased']));
    const problems = endpoint.received.flatMap((request) => {
      const name = webhookOf(request);
      const schema = operation(name).requestBody.content['application/json'].schema as Json;
      const validate = reader.compile(schema.$ref);
      const where = `${name} ${request.text}`;
      return [
        ...(validate(request.body) ? [] : [`${where}: ${JSON.stringify(validate.errors)}`]),
        ...unnamedFields(reader.doc, schema, request.body).map((field) => `${where}: ${field} is not named`),
      ];
    });
    expect(problems).to.deep.equal([]);
  });

  it('every documented header is sent, fitting its schema, and the signature checks out by the documented recipe', function () {
    const problems = endpoint.received.flatMap((request) => {
      const name = webhookOf(request);
      const parameters = operation(name).parameters as Json[];
      return parameters.flatMap((parameter, i) => {
        const value = request.headers[String(parameter.name).toLowerCase()];
        if (value === undefined) return [`${name}: no ${parameter.name}`];
        const validate = reader.compile(`#/webhooks/${name}/post/parameters/${i}/schema`);
        return validate(value) ? [] : [`${name}: ${parameter.name} ${String(value)}`];
      }).concat(signedAsDocumented(request) ? [] : [`${name}: the signature does not check out as documented`]);
    });
    expect(problems).to.deep.equal([]);
    const recipe = (operation('leadDelivery').parameters as Json[]).find((p) => p.name === 'X-Leadpost-Signature')!.description as string;
    for (const words of ['<timestamp>.<raw body>', 'lower-case hex', 'UTF-8', 'constant time']) expect(recipe).to.contain(words);
  });

  it("a price is in units of the currency, as the schema says: the lead sold at the routing file's 42.5 arrives as 42.5, not as 4250 cents", function () {
    const prices = endpoint.received.filter((r) => webhookOf(r) === 'leadDelivery').map((r) => r.body.price);
    expect(new Set(prices)).to.deep.equal(new Set([42.5]));
    const schemas = (reader.doc as Json).components.schemas;
    // A buyer reading "whole cents" would book 42.5 as 42.5 cents, or look for integers only.
    for (const described of [schemas.LeadDelivery.properties.price.description, schemas.BidAnswer.properties.bid.description] as string[]) {
      expect(described).to.contain('in units of').and.to.contain('not in cents').and.not.to.contain('whole cents');
    }
  });

  it('says a request can come twice within one attempt or bid: the resend after a reset on a kept-alive connection reaches a buyer that read it and dropped the connection', function () {
    for (const name of ['leadDelivery', 'bidRequest']) expect(operation(name).description, name).to.contain('sent once more on a new one').and.to.contain('dropped the connection');
  });

  it('a retry carries the same Idempotency-Key and a fresh timestamp, within the tolerance the document advises', function () {
    const byKey = new Map<string, ReceivedDelivery[]>();
    for (const request of endpoint.received.filter((r) => webhookOf(r) === 'leadDelivery')) {
      const key = String(request.headers['idempotency-key']);
      byKey.set(key, [...(byKey.get(key) ?? []), request]);
    }
    const retried = [...byKey.values()].find((requests) => requests.length > 1)!;
    expect(retried, 'the refused delivery was sent again').to.not.equal(undefined);
    expect(retried[1]!.text).to.equal(retried[0]!.text);
    const [then, now] = retried.map((r) => Number(r.headers['x-leadpost-timestamp']));
    expect(now!).to.be.greaterThan(then!);
    const timestamp = (operation('leadDelivery').parameters as Json[]).find((p) => p.name === 'X-Leadpost-Timestamp')!.description as string;
    expect(timestamp).to.contain('stamped and signed afresh').and.to.contain('5 minutes');
    for (const request of endpoint.received) expect(Math.abs(Date.now() / 1000 - Number(request.headers['x-leadpost-timestamp']))).to.be.lessThan(300);
  });
});
