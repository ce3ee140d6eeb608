import { expect } from 'chai';
import { ALWAYS_OPEN_ROUTING, validLead } from '../support/service.js';
import { tempDir } from '../support/tmp.js';
import { Client } from '../reliability/support/client.js';
import { ServerProcess, createKey, writeRouting } from '../reliability/support/server-process.js';

// `MX_LOOKUP=0` tells `leadpost serve` to make no DNS lookups: the e-mail check of a domain that is
// not a large mailbox provider says unknown, and says that no lookup was made (`lookup_off`), in
// the lead's events and in the metric, not that DNS failed (`dns_error` is what an alert on a
// failing resolver watches).

describe('leadpost serve with MX_LOOKUP=0', function () {
  this.timeout(60_000);
  const client = new Client(2);
  const dir = tempDir('lookups-off');
  let server: ServerProcess | undefined;

  after(async function () {
    await server?.kill();
    client.destroy();
    dir.remove();
  });

  it("records an e-mail check it made no lookup for as unknown, lookup_off, never as a DNS error", async function () {
    const routingFile = writeRouting(dir.path, ALWAYS_OPEN_ROUTING);
    const supplier = await createKey(dir.path, 'supplier', 'sup-a');
    const admin = await createKey(dir.path, 'admin', 'ops');
    server = await ServerProcess.start({ dataDir: dir.path, routingFile, env: { MX_LOOKUP: '0' } });
    const posted = await client.post(server.httpsPort, validLead({ email: 'jo@leadpost-lookups-off.example' }), { 'x-api-key': supplier.key });
    expect(posted.status, posted.text).to.equal(201);
    const events = await client.request(server.httpsPort, 'GET', `/functions/leads/${posted.body.lead_id as number}/events`, { 'x-api-key': admin.key });
    const enriched = (events.body.items as Array<{ type: string; data: { checks: { email: unknown } } }>).find((e) => e.type === 'LeadEnriched');
    expect(enriched?.data.checks.email, events.text).to.deep.equal({ result: 'unknown', provider: 'dns-mx', detail: 'lookup_off' });
    const metrics = await client.request(server.httpsPort, 'GET', '/metrics');
    expect(metrics.text).to.include('leadpost_lead_checks_total{check="email",result="unknown",reason="lookup_off"} 1');
    expect(metrics.text).to.not.include('reason="dns_error"');
  });
});
