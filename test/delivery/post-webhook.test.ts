import { expect } from 'chai';
import { rootCertificates } from 'node:tls';
import type { Socket } from 'node:net';
import { IDLE_MS, buyerAgent } from '../../src/delivery/buyer-agent.js';
import { MAX_ANSWER_BYTES, postWebhook } from '../../src/delivery/post-webhook.js';
import { Agent, type Server, createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { loadOrCreateTls } from '../../src/http/tls.js';
import { tempDir } from '../support/tmp.js';
import { until } from '../support/until.js';
import { BuyerEndpoint } from './buyer-endpoint.js';

// One POST to a buyer, time-boxed from when it has a connection.

describe('delivery: one POST to a buyer', function () {
  let endpoint: BuyerEndpoint;
  before(async function () {
    // Every answer takes 200 ms.
    endpoint = await BuyerEndpoint.start(() => new Promise((resolve) => setTimeout(() => resolve(200), 200)));
  });
  after(async () => endpoint?.stop());

  it("a request waiting for one of the agent's sockets is not timed out by that wait: the buyer's own time is boxed", async function () {
    // One socket: the third POST waits 400 ms for the two before it, then takes its own 200 ms.
    const agent = new Agent({ keepAlive: true, maxSockets: 1, ca: [...rootCertificates, endpoint.cert] });
    try {
      const post = () => postWebhook({ url: endpoint.url, body: '{}', headers: { 'content-type': 'application/json' }, timeoutMs: 500, agent });
      const results = await Promise.all([post(), post(), post()]);
      expect(results.map((r) => r.kind)).to.deep.equal(['response', 'response', 'response']);
    } finally {
      agent.destroy();
    }
  });

  it('a buyer slower than the box is still a timeout', async function () {
    const agent = new Agent({ keepAlive: true, ca: [...rootCertificates, endpoint.cert] });
    try {
      const result = await postWebhook({ url: endpoint.url, body: '{}', headers: {}, timeoutMs: 100, agent });
      expect(result.kind).to.equal('timeout');
    } finally {
      agent.destroy();
    }
  });
});

describe('delivery: a kept connection the buyer has closed', function () {
  this.timeout(30_000);
  let endpoint: BuyerEndpoint;
  /** What the buyer does with a request that comes on a connection an earlier one came on. */
  let onReused: 'close' | 200 = 'close';
  /** And with one on a new connection. */
  let onNew: 'close' | 200 = 200;
  before(async function () {
    endpoint = await BuyerEndpoint.start((request) => (request.reused ? onReused : onNew), { keepIdleConnections: true });
  });
  after(async () => endpoint?.stop());
  afterEach(() => {
    endpoint.received.length = 0;
    onReused = 'close';
    onNew = 200;
  });

  const post = (agent: Agent, body: string) => postWebhook({ url: endpoint.url, body, headers: { 'content-type': 'application/json' }, timeoutMs: 5_000, agent });

  it('a POST that meets the close on a reused connection is sent once more on a new one, and delivered', async function () {
    const agent = buyerAgent({ maxSockets: 1, ca: endpoint.cert });
    try {
      expect(await post(agent, '{"n":1}')).to.include({ kind: 'response', status: 200 });
      // The buyer closes the kept connection as the next POST comes on it.
      const second = await post(agent, '{"n":2}');
      expect(second).to.include({ kind: 'response', status: 200 });
      expect(endpoint.received.map((r) => [r.text, r.reused])).to.deep.equal([
        ['{"n":1}', false],
        ['{"n":2}', true],
        ['{"n":2}', false],
      ]);
    } finally {
      agent.destroy();
    }
  });

  it('sent once more only: a buyer that closes every connection is a connection error, after two tries; a new connection closed is not tried again', async function () {
    const agent = buyerAgent({ maxSockets: 1, ca: endpoint.cert });
    try {
      expect(await post(agent, '{"n":1}')).to.include({ kind: 'response', status: 200 });
      onNew = 'close';
      expect(await post(agent, '{"n":2}')).to.include({ kind: 'connection_error' });
      expect(endpoint.received.map((r) => r.reused)).to.deep.equal([false, true, false]);
      expect(await post(agent, '{"n":3}')).to.include({ kind: 'connection_error' });
      expect(endpoint.received.map((r) => r.text)).to.deep.equal(['{"n":1}', '{"n":2}', '{"n":2}', '{"n":3}']);
    } finally {
      agent.destroy();
    }
  });

  it("closes a free connection a second before the buyer's Keep-Alive header says the buyer will, rather than send on it then", async function () {
    const hinting = await BuyerEndpoint.start(() => ({ status: 200, headers: { 'keep-alive': 'timeout=2' } }), { keepIdleConnections: true });
    const agent = buyerAgent({ ca: hinting.cert });
    try {
      let free: Socket | undefined;
      const closed = new Promise<'closed'>((resolve) => {
        agent.once('free', (socket: Socket) => {
          free = socket;
          socket.once('close', () => resolve('closed'));
        });
      });
      expect(await postWebhook({ url: hinting.url, body: '{}', headers: {}, timeoutMs: 5_000, agent })).to.include({ kind: 'response', status: 200 });
      // Kept for reuse, then closed by this side (the endpoint keeps it open for ever): at the
      // hint less a second, long before the agent's own IDLE_MS.
      expect(free!.destroyed, 'kept for reuse').to.equal(false);
      const bound = new Promise<'still open'>((resolve) => setTimeout(() => resolve('still open'), IDLE_MS / 3).unref());
      expect(await Promise.race([closed, bound])).to.equal('closed');
      expect(Object.keys(agent.freeSockets)).to.deep.equal([]);
    } finally {
      agent.destroy();
      await hinting.stop();
    }
  });
});

describe("delivery: a buyer's answer with a long body", function () {
  this.timeout(30_000);
  const dir = tempDir('endless-buyer');
  let server: Server;
  let url = '';
  let cert = '';
  /** Bytes each answer put on the wire before its connection was closed, and when it was. */
  const answers: Array<{ sent: number; closedAfterMs: number }> = [];

  before(async function () {
    const tls = await loadOrCreateTls({ dataDir: dir.path });
    cert = tls.cert;
    // 200 at once, then a body that never ends, as a misconfigured URL or a debug stream might.
    server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
      req.resume();
      const began = performance.now();
      let sent = 0;
      const chunk = Buffer.alloc(16 * 1024, 120);
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      const pump = () => {
        while (res.write(chunk)) sent += chunk.length;
        sent += chunk.length;
      };
      res.on('drain', pump);
      res.on('close', () => answers.push({ sent, closedAfterMs: performance.now() - began }));
      pump();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/leads`;
  });
  after(async function () {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    dir.remove();
  });

  it(`is recorded at its status, and its body read no further than ${MAX_ANSWER_BYTES / 1024} KiB: the connection is closed, not kept downloading for the time box`, async function () {
    const agent = new Agent({ keepAlive: true, ca: [...rootCertificates, cert] });
    try {
      const result = await postWebhook({ url, body: '{}', headers: { 'content-type': 'application/json' }, timeoutMs: 20_000, agent });
      expect(result).to.include({ kind: 'response', status: 200 });
      await until('the buyer seeing its connection closed', () => answers.length === 1);
      // Closed long before the 20 s box, having sent about what the service read (and what the
      // socket buffers held), not the gigabytes of a 20 s download.
      expect(answers[0]!.closedAfterMs).to.be.below(10_000);
      expect(answers[0]!.sent).to.be.below(8 * 1024 * 1024);
    } finally {
      agent.destroy();
    }
  });
});
