import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import { formatKey, issueKey, newKeyMaterial } from '../../src/keys/api-keys.js';
import { changeKeys } from '../../src/keys/key-stream.js';
import { type RunningChild, runChild } from '../support/child.js';
import { TestService, validLead } from '../support/service.js';
import { tempDir } from '../support/tmp.js';

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));

describe('post-lead under concurrency', function () {
  this.timeout(60_000);

  describe('one server', function () {
    let svc: TestService;
    let key: string;
    before(async () => {
      svc = await TestService.start();
      key = await svc.key();
    });
    after(async () => svc.stop());

    it('20 concurrent copies of one consumer: exactly one accepted, 19 DUPLICATE', async function () {
      const lead = validLead();
      const replies = await Promise.all(Array.from({ length: 20 }, () => svc.post(lead, { 'x-api-key': key })));
      expect(replies.filter((r) => r.status === 201)).to.have.length(1);
      expect(replies.filter((r) => r.status === 409 && r.body.code === 'DUPLICATE')).to.have.length(19);
      // Every copy was recorded as its own lead: 20 distinct ids.
      expect(new Set(replies.map((r) => r.body.lead_id)).size).to.equal(20);
    });

    it('sequential copies with the same e-mail from another supplier are duplicates too', async function () {
      const lead = validLead();
      expect((await svc.post(lead, { 'x-api-key': key })).status).to.equal(201);
      const other = await svc.key('supplier', 'sup-2');
      const copy = await svc.post(validLead({ email: lead.email }), { 'x-api-key': other });
      expect(copy.body.code).to.equal('DUPLICATE');
    });

    it('20 concurrent posts with one Idempotency-Key: one lead; the rest are in flight (409) or the replay', async function () {
      const lead = validLead();
      const headers = { 'x-api-key': key, 'idempotency-key': `burst-${Date.now()}` };
      const replies = await Promise.all(Array.from({ length: 20 }, () => svc.post(lead, headers)));
      const created = replies.filter((r) => r.status === 201);
      const inFlight = replies.filter((r) => r.status === 409);
      for (const reply of inFlight) {
        expect(reply.body.code).to.equal('IDEMPOTENCY_CONFLICT');
        expect(reply.headers['retry-after']).to.equal('1');
      }
      expect(created.length + inFlight.length).to.equal(20);
      // However many 201s (the original and replays), they name one and the same lead.
      expect(new Set(created.map((r) => r.body.lead_id)).size).to.equal(1);
      expect(created.filter((r) => r.headers['idempotency-replayed'] !== 'true')).to.have.length(1);
      const after = await svc.post(lead, headers);
      expect(after.headers['idempotency-replayed']).to.equal('true');
      expect(after.body.lead_id).to.equal(created[0]!.body.lead_id);
    });
  });

  describe('two server processes sharing one data dir', function () {
    const dir = tempDir('two-servers');
    const servers: RunningChild[] = [];
    const ports: number[] = [];
    let key: string;
    const agent = new Agent({ keepAlive: true, rejectUnauthorized: false, maxSockets: 50 });

    before(async function () {
      const routing = join(dir.path, 'routing.json');
      writeFileSync(routing, JSON.stringify({ buyers: [{ id: 'capped', price: 25, caps: [{ period: 'day', max: 13 }] }] }));
      const store = await EmbeddedEventStore.open(dir.path);
      const { id, secret } = newKeyMaterial();
      await changeKeys(store, (state) => issueKey(state, { role: 'supplier', name: 'sup-1', now: Date.now(), id, secret }));
      await store.close();
      key = formatKey(id, secret);
      for (let i = 0; i < 2; i++) {
        const child = runChild(['serve'], {
          LEADPOST_DATA_DIR: dir.path,
          LEADPOST_ROUTING_FILE: routing,
          PORT: '0',
          HTTP_PORT: '0',
          HOST: '127.0.0.1',
          MX_LOOKUP: '0',
          RATE_LIMIT_PER_SECOND: '0',
          LEAD_ID_BLOCK_SIZE: '10',
        }, { script: BIN });
        await child.until('{', 1);
        const listening = child.lines.map((l) => JSON.parse(l) as { msg: string; https_port: number }).find((l) => l.msg === 'leadpost listening')!;
        servers.push(child);
        ports.push(listening.https_port);
      }
    });
    after(async () => {
      agent.destroy();
      for (const server of servers) server.process.kill('SIGTERM');
      await Promise.all(servers);
      dir.remove();
    });

    const post = (port: number, body: unknown) =>
      new Promise<{ status: number; body: Record<string, unknown> }>((resolve, reject) => {
        const req = request(
          { host: '127.0.0.1', port, method: 'POST', path: '/functions/leads', agent, headers: { 'content-type': 'application/json', 'x-api-key': key } },
          (res) => {
            let text = '';
            res.setEncoding('utf8').on('data', (c: string) => (text += c)).on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
          },
        );
        req.on('error', reject);
        req.end(JSON.stringify(body));
      });

    it('a cap of 13 holds exactly with 60 concurrent posts spread over both; lead ids stay unique', async function () {
      const replies = await Promise.all(Array.from({ length: 60 }, (_, i) => post(ports[i % 2]!, validLead())));
      expect(replies.every((r) => r.status === 201), JSON.stringify(replies.find((r) => r.status !== 201))).to.equal(true);
      expect(replies.filter((r) => r.body.code === 'SOLD')).to.have.length(13);
      expect(replies.filter((r) => r.body.code === 'UNSOLD')).to.have.length(47);
      expect(new Set(replies.map((r) => r.body.lead_id)).size).to.equal(60);
    });

    it('one consumer posted to both at once is accepted once', async function () {
      const lead = validLead();
      const replies = await Promise.all(Array.from({ length: 20 }, (_, i) => post(ports[i % 2]!, lead)));
      expect(replies.filter((r) => r.status === 201)).to.have.length(1);
      expect(replies.filter((r) => r.body.code === 'DUPLICATE')).to.have.length(19);
    });
  });
});
