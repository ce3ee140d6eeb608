import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import type { ClientRequest } from 'node:http';
import { request } from 'node:https';
import { connect } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import { formatKey, issueKey, newKeyMaterial } from '../../src/keys/api-keys.js';
import { changeKeys } from '../../src/keys/key-stream.js';
import { startProvider } from '../enrichment/provider-server.js';
import { runChild } from '../support/child.js';
import { validLead } from '../support/service.js';
import { tempDir } from '../support/tmp.js';
import { until } from '../support/until.js';

// SIGTERM on `leadpost serve` while posts are in flight, made deterministic: some posts are held
// inside the service by a phone verifier that answers only when the test says so, others have
// sent their headers (the server answered 100 Continue) but not yet their body. None may be cut
// off, every lead answered 2xx must be in the event store afterwards, and the process must exit 0
// within 10 s, refusing new connections meanwhile.

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));
const HELD_AT_VERIFIER = 12;
const BODY_STILL_COMING = 6;

interface Answer {
  readonly status: number;
  readonly body: { code?: string; lead_id?: number | null };
}

/** A POST that resolves with the complete answer, or rejects on a reset or a cut-off body. */
function answerOf(req: ClientRequest): Promise<Answer> {
  return new Promise((resolve, reject) => {
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => {
        try {
          resolve({ status: res.statusCode!, body: JSON.parse(text) as Answer['body'] });
        } catch {
          reject(new Error(`incomplete body (${res.statusCode}): ${text.slice(0, 80)}`));
        }
      });
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

describe('leadpost serve: SIGTERM drains in-flight posts', function () {
  this.timeout(60_000);

  it('finishes every post in flight, loses no acknowledged lead, refuses new connections and exits 0 within 10 s', async function () {
    const dir = tempDir('drain');
    const verifier = await startProvider();
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => (release = resolve));
    verifier.handle((_req, _body, res) => void released.then(() => res.end('{"result":"pass"}')));
    const routing = join(dir.path, 'routing.json');
    writeFileSync(routing, JSON.stringify({ buyers: [{ id: 'any-buyer', price: 10 }], buckets: [{ id: 'unsold', default: true }] }));
    const setup = await EmbeddedEventStore.open(dir.path);
    const { id, secret } = newKeyMaterial();
    await changeKeys(setup, (state) => issueKey(state, { role: 'supplier', name: 'sup-1', now: Date.now(), id, secret }));
    await setup.close();
    const key = formatKey(id, secret);

    const server = runChild(['serve'], {
      LEADPOST_DATA_DIR: dir.path,
      LEADPOST_ROUTING_FILE: routing,
      PORT: '0',
      HTTP_PORT: '0',
      HOST: '127.0.0.1',
      MX_LOOKUP: '0',
      RATE_LIMIT_PER_SECOND: '0',
      PHONE_VERIFIER_URL: verifier.url,
    }, { script: BIN });
    try {
      await server.until('{', 1);
      const port = (JSON.parse(server.lines[0]!) as { https_port: number }).https_port;
      const post = (headers: Record<string, string> = {}) =>
        request({
          host: '127.0.0.1', port, method: 'POST', path: '/functions/leads', agent: false, rejectUnauthorized: false,
          headers: { 'content-type': 'application/json', 'x-api-key': key, ...headers },
        });

      // Posts held inside the service, waiting for the phone verifier.
      const held = Array.from({ length: HELD_AT_VERIFIER }, () => {
        const req = post();
        req.end(JSON.stringify(validLead()));
        return answerOf(req);
      });
      // Posts whose headers the server has read (it said 100 Continue) and whose body is still to come.
      const slow = Array.from({ length: BODY_STILL_COMING }, () => {
        const body = Buffer.from(JSON.stringify(validLead()));
        const req = post({ 'content-length': String(body.length), expect: '100-continue' });
        req.flushHeaders();
        const accepted = new Promise<void>((resolve) => req.once('continue', resolve));
        return { req, body, accepted, answer: answerOf(req) };
      });
      await until(() => `${HELD_AT_VERIFIER} posts held at the verifier (${verifier.bodies.length} so far)`, () => verifier.bodies.length >= HELD_AT_VERIFIER, 30_000);
      await Promise.all(slow.map((s) => s.accepted));

      const signalled = Date.now();
      server.process.kill('SIGTERM');
      await until("the 'leadpost stopping' line after SIGTERM", () => server.lines.some((l) => l.includes('leadpost stopping')), 10_000, 10);

      // The process is still draining, and no longer takes connections.
      expect(server.process.exitCode).to.equal(null);
      const refused = await new Promise<string>((resolve) => {
        const socket = connect(port, '127.0.0.1');
        socket.on('connect', () => (socket.destroy(), resolve('connected')));
        socket.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
      });
      expect(refused).to.equal('ECONNREFUSED');

      for (const s of slow) s.req.end(s.body);
      release();
      const answers = await Promise.all([...held, ...slow.map((s) => s.answer)]);
      const result = await server;
      const took = Date.now() - signalled;

      expect(answers.map((a) => a.status)).to.deep.equal(answers.map(() => 201));
      expect(answers.map((a) => a.body.code)).to.deep.equal(answers.map(() => 'SOLD'));
      expect(result.code, result.stderr).to.equal(0);
      expect(took).to.be.lessThan(10_000);
      expect(result.lines.some((l) => l.includes('"msg":"leadpost stopped"'))).to.equal(true);

      // Every acknowledged lead is on disk: reopen the data dir the way the next start would.
      const store = await EmbeddedEventStore.open(dir.path);
      try {
        for (const answer of answers) {
          const types = (await store.readStream(`lead-${answer.body.lead_id!}`)).map((e) => e.type);
          expect(types, `lead ${answer.body.lead_id}`).to.deep.equal(['LeadReceived', 'LeadEnriched', 'LeadRouted', 'LeadSold']);
        }
      } finally {
        await store.close();
      }
    } finally {
      release();
      server.process.kill('SIGKILL');
      await verifier.close();
      dir.remove();
    }
  });
});
