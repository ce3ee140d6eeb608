import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { hashedStream } from '../../src/commands/streams.js';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import { formatKey, issueKey, newKeyMaterial } from '../../src/keys/api-keys.js';
import { changeKeys } from '../../src/keys/key-stream.js';
import { BuyerEndpoint } from '../delivery/buyer-endpoint.js';
import { type RunningChild, runChild } from '../support/child.js';
import { validLead } from '../support/service.js';
import { tempDir } from '../support/tmp.js';

// Two `leadpost serve` processes on one data dir, pinged and posted at once: the cap of the one
// bidding buyer holds across both processes and across pings and posts. A ping only looks at the
// cap; the post takes the slot, so however many pings bid, no more leads sell than the cap allows.

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));
const CAP = 10;

const ROUTING = {
  buyers: [{ id: 'capped', price: 30, ping: { kind: 'static' }, caps: [{ period: 'day', max: CAP }] }],
  buckets: [{ id: 'unsold', default: true }],
};

interface Answer {
  readonly status: number;
  readonly body: { code: string; ping_id?: string; bid?: number | null; revenue?: number };
}

/** Two `leadpost serve` processes on `dir`, with one supplier key, and a way to send each a JSON POST. */
async function twoServers(dir: string, routingFile: string, extraEnv: Record<string, string> = {}) {
  const store = await EmbeddedEventStore.open(dir);
  const { id, secret } = newKeyMaterial();
  await changeKeys(store, (state) => issueKey(state, { role: 'supplier', name: 'sup-1', now: Date.now(), id, secret }));
  await store.close();
  const key = formatKey(id, secret);
  const env = {
    LEADPOST_DATA_DIR: dir, LEADPOST_ROUTING_FILE: routingFile, PORT: '0', HTTP_PORT: '0', HOST: '127.0.0.1', MX_LOOKUP: '0',
    RATE_LIMIT_PER_SECOND: '0', PING_RATE_LIMIT_PER_SECOND: '0', ...extraEnv,
  };
  const children: RunningChild[] = [runChild(['serve'], env, { script: BIN }), runChild(['serve'], env, { script: BIN })];
  const agent = new Agent({ keepAlive: true, rejectUnauthorized: false, maxSockets: 50 });
  const stop = async () => {
    agent.destroy();
    for (const child of children) child.process.kill('SIGTERM');
    await Promise.all(children);
  };
  try {
    // Both waits begin before either child can print: a line printed before its wait began would not be seen.
    await Promise.all(children.map((child) => child.until('{', 1)));
  } catch (error) {
    await stop();
    throw error;
  }
  const ports = children.map((child) => child.lines.map((line) => JSON.parse(line) as { https_port?: number }).find((line) => line.https_port)!.https_port!);
  const send = (port: number, path: string, body: unknown) =>
    new Promise<Answer>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, method: 'POST', path, agent, headers: { 'content-type': 'application/json', 'x-api-key': key } }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (c: string) => (text += c)).on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
      });
      req.on('error', reject);
      req.end(JSON.stringify(body));
    });
  return { agent, ports, send, stop };
}

describe('ping/post over two processes', function () {
  this.timeout(120_000);

  it(`a cap of ${CAP} holds over 200 concurrent pings and posts sent to two processes`, async function () {
    const dir = tempDir('ping-two-processes');
    const routingFile = join(dir.path, 'routing.json');
    writeFileSync(routingFile, JSON.stringify(ROUTING));
    const servers = await twoServers(dir.path, routingFile);
    const { ports, send } = servers;
    try {
      const ping = (i: number, s1: string) => send(ports[i % 2]!, '/functions/pings', { zip: '90210', accident_state: 'CA', sid: 'src-1', s1 });

      // While the cap is empty every ping sees room: 100 bids, half from each process.
      const pings = await Promise.all(Array.from({ length: 100 }, (_, i) => ping(i, `first-${i}`)));
      expect(pings.map((p) => `${p.status} ${p.body.code} ${p.body.bid}`)).to.deep.equal(Array(100).fill('201 BID 30'));

      // Each ping's lead posted to the other process, while another 100 pings arrive.
      const posts = pings.map((p, i) => send(ports[(i + 1) % 2]!, '/functions/leads', validLead({ ping_id: p.body.ping_id })));
      const morePings = Array.from({ length: 100 }, (_, i) => ping(i, `second-${i}`));
      const [posted, pinged] = await Promise.all([Promise.all(posts), Promise.all(morePings)]);

      const sold = posted.filter((p) => p.body.code === 'SOLD');
      expect(sold).to.have.length(CAP);
      expect(sold.every((p) => p.body.revenue === 30)).to.equal(true);
      expect(posted.filter((p) => p.body.code === 'UNSOLD')).to.have.length(100 - CAP);
      expect(pinged.every((p) => p.status === 201 && ['BID', 'NO_BID'].includes(p.body.code))).to.equal(true);
      // The cap is full now: no process bids any more.
      const after = await Promise.all([ping(0, 'after-0'), ping(1, 'after-1')]);
      expect(after.map((p) => p.body.code)).to.deep.equal(['NO_BID', 'NO_BID']);
    } finally {
      await servers.stop();
      dir.remove();
    }
  });

  it('identical pings sent to both processes at once: one ping recorded, every answer with its ping_id; each process asks the bidder at most once', async function () {
    // A webhook bidder that answers after 300 ms: both processes' rounds are open at once.
    const bidder = await BuyerEndpoint.start(() => new Promise((resolve) => setTimeout(() => resolve({ status: 200, body: '{"bid": 45}' }), 300)));
    const dir = tempDir('ping-two-processes-same');
    const routingFile = join(dir.path, 'routing.json');
    const caFile = join(dir.path, 'bidder-ca.pem');
    writeFileSync(caFile, bidder.cert);
    writeFileSync(routingFile, JSON.stringify({
      buyers: [{ id: 'hook', price: 30, ping: { kind: 'webhook', url: bidder.url, timeout_ms: 900 } }],
      buckets: [{ id: 'unsold', default: true }],
    }));
    const servers = await twoServers(dir.path, routingFile, { NODE_EXTRA_CA_CERTS: caFile });
    const { agent, ports, send } = servers;
    const fields = { zip: '90210', accident_state: 'CA', sid: 'src-1', s1: 'same-fields' };
    try {
      const ping = (port: number) => send(port, '/functions/pings', fields);
      // Both processes' connections are open first, so that the pings arrive together.
      await Promise.all(ports.map((port) => new Promise<void>((resolve, reject) => request({ host: '127.0.0.1', port, path: '/healthz', agent }, (res) => res.resume().on('end', resolve)).on('error', reject).end())));
      const replies = await Promise.all(Array.from({ length: 20 }, (_, i) => ping(ports[i % 2]!)));
      expect(replies.map((r) => `${r.status} ${r.body.code} ${r.body.bid}`)).to.deep.equal(Array(20).fill('201 BID 45'));
      const pingIds = new Set(replies.map((r) => r.body.ping_id));
      expect(pingIds.size, [...pingIds].join(' ')).to.equal(1);
      // Each process ran one round (the bidder may be asked by both); both asked about the one ping.
      expect(bidder.received.length).to.be.within(1, 2);
      expect(bidder.received.every((r) => r.body.ping_id === replies[0]!.body.ping_id)).to.equal(true);
    } finally {
      await servers.stop();
      await bidder.stop();
    }
    try {
      const events = await EmbeddedEventStore.open(dir.path);
      try {
        const lookup = await events.readStream(hashedStream('ping-fields', 'sup-1', fields.zip, fields.accident_state, fields.sid, fields.s1, 'false'));
        expect(lookup.map((e) => e.type)).to.deep.equal(['PingIssued']);
        const pinged = await events.readStream(`ping-${(lookup[0]!.data as { ping_id: string }).ping_id}`);
        expect(pinged.map((e) => e.type)).to.deep.equal(['LeadPinged', 'PingBidsCollected']);
      } finally {
        await events.close();
      }
    } finally {
      dir.remove();
    }
  });
});
