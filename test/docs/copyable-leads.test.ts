import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { MxResolver } from '../../src/enrichment/email.js';
import { openApiDocument } from '../../src/docs/openapi.js';
import { DocumentReader } from '../support/openapi.js';
import { TestService } from '../support/service.js';

// The leads the docs show a supplier, posted as shown: the Quick start's, the supplier guide's,
// and the OpenAPI document's Lead example and request example. Each is the lead a supplier copies
// first, so each must be accepted by the service as `npm start` runs it: the example routing file,
// and DNS answering as it does on the internet, where example.com says by a null MX (RFC 7505)
// that it takes no mail, so a lead of that domain fails its e-mail check.

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
type Json = Record<string, any>;

const INTERNET_DNS: MxResolver = {
  resolveMx: async (domain) => (domain === 'example.com' ? [{ exchange: '', priority: 0 }] : [{ exchange: `mx.${domain}`, priority: 10 }]),
  resolveAddresses: async () => ['192.0.2.10'],
};

/** The JSON after `-d '` in the first curl of a README section. */
function readmeLead(readme: string, heading: string): Json {
  const section = readme.slice(readme.indexOf(heading));
  const body = /-d '([^']*)'/.exec(section)?.[1];
  if (body === undefined) throw new Error(`no curl -d in ${heading}`);
  return JSON.parse(body) as Json;
}

describe('docs: the example leads are accepted as shown', function () {
  this.timeout(60_000);
  let svc: TestService;
  let key: string;

  before(async () => {
    const routing: unknown = JSON.parse(readFileSync(`${ROOT}config/routing.json`, 'utf8'));
    svc = await TestService.start({ routing, resolver: INTERNET_DNS });
    key = await svc.key('supplier', 'my-supplier');
  });
  after(async () => svc?.stop());

  const examples = async (): Promise<Array<[string, Json]>> => {
    const readme = readFileSync(`${ROOT}README.md`, 'utf8');
    const doc = (await openApiDocument()) as Json;
    return [
      ['README Quick start', readmeLead(readme, '## Quick start')],
      ['README supplier guide', readmeLead(readme, '## Supplier guide: post a lead')],
      ['OpenAPI Lead schema example', doc.components.schemas.Lead.example as Json],
      ['OpenAPI request example of POST /functions/leads', doc.paths['/functions/leads'].post.requestBody.content['application/json'].example as Json],
    ];
  };

  it('each is sold, its e-mail passing the check', async () => {
    for (const [where, lead] of await examples()) {
      // As test leads, so that the examples (one consumer, told in the same words) are no duplicates of each other.
      const reply = await svc.post({ ...lead, test: true }, { 'x-api-key': key });
      expect([reply.status, reply.body.code], `${where}: ${reply.text}`).to.deep.equal([201, 'SOLD']);
    }
  });

  it("names xxTrustedFormCertUrl as the service takes it: in certificate_url's place it fits the Lead schema and sells; with neither it fits not and is INVALID", async () => {
    const doc = (await openApiDocument()) as Json;
    const fitsLead = new DocumentReader(doc).compile('#/components/schemas/Lead');
    const { certificate_url: certificateUrl, ...rest } = doc.components.schemas.Lead.example as Json;
    const aliased = { ...rest, xxTrustedFormCertUrl: certificateUrl, test: true };
    expect(fitsLead(aliased), JSON.stringify(fitsLead.errors)).to.equal(true);
    const sold = await svc.post(aliased, { 'x-api-key': key });
    expect([sold.status, sold.body.code], sold.text).to.deep.equal([201, 'SOLD']);

    const neither = { ...rest, test: true };
    expect(fitsLead(neither)).to.equal(false);
    const invalid = await svc.post(neither, { 'x-api-key': key });
    expect([invalid.status, invalid.body.errors], invalid.text).to.deep.equal([422, [{ field: 'certificate_url', code: 'required', message: 'certificate_url is required' }]]);
  });

  it('would have failed on an example.com address: the DNS here answers as the internet does', async () => {
    const [, lead] = (await examples())[0]!;
    const reply = await svc.post({ ...lead, email: 'ada@example.com', test: true }, { 'x-api-key': key });
    expect([reply.status, reply.body.code], reply.text).to.deep.equal([422, 'VERIFICATION_FAILED']);
  });
});
