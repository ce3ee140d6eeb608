import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import { formatKey, issueKey, newKeyMaterial } from '../../src/keys/api-keys.js';
import { changeKeys } from '../../src/keys/key-stream.js';
import { runChild } from '../support/child.js';
import { validLead } from '../support/service.js';
import { tempDir } from '../support/tmp.js';
import { BuyerEndpoint } from './buyer-endpoint.js';
import { deliveryRouting } from './harness.js';

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));

describe('delivery inside leadpost serve', function () {
  this.timeout(30_000);

  it('the worker that serve starts POSTs a sold lead to its webhook buyer', async function () {
    const endpoint = await BuyerEndpoint.start(() => 200);
    const dir = tempDir('serve-delivery');
    // The buyer's self-signed certificate is trusted the way an operator would trust a private CA.
    const caFile = join(dir.path, 'buyer-ca.pem');
    writeFileSync(caFile, endpoint.cert);
    const routing = join(dir.path, 'routing.json');
    writeFileSync(routing, JSON.stringify(deliveryRouting(endpoint.url)));
    const store = await EmbeddedEventStore.open(dir.path);
    const { id, secret } = newKeyMaterial();
    await changeKeys(store, (state) => issueKey(state, { role: 'supplier', name: 'sup-1', now: Date.now(), id, secret }));
    await store.close();
    const server = runChild(['serve'], {
      LEADPOST_DATA_DIR: dir.path, LEADPOST_ROUTING_FILE: routing, PORT: '0', HTTP_PORT: '0', HOST: '127.0.0.1', MX_LOOKUP: '0', NODE_EXTRA_CA_CERTS: caFile,
    }, { script: BIN });
    const agent = new Agent({ rejectUnauthorized: false });
    try {
      await server.until('{', 1);
      const port = (JSON.parse(server.lines[0]!) as { https_port: number }).https_port;
      const reply = await new Promise<{ status: number; body: { lead_id: number; code: string } }>((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/functions/leads', agent, headers: { 'content-type': 'application/json', 'x-api-key': formatKey(id, secret) } }, (res) => {
          let text = '';
          res.setEncoding('utf8').on('data', (c: string) => (text += c)).on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
        });
        req.on('error', reject);
        req.end(JSON.stringify(validLead({ zip: '90210' })));
      });
      expect(reply.body.code).to.equal('SOLD');
      const started = Date.now();
      while (endpoint.forLead(reply.body.lead_id).length === 0 && Date.now() - started < 10_000) await new Promise((r) => setTimeout(r, 50));
      const received = endpoint.forLead(reply.body.lead_id);
      expect(received).to.have.length(1);
      expect(received[0]!.headers['idempotency-key']).to.equal(`lead-${reply.body.lead_id}`);
    } finally {
      agent.destroy();
      server.process.kill('SIGTERM');
      await server;
      await endpoint.stop();
      dir.remove();
    }
  });
});
