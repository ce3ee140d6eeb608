import { expect } from 'chai';
import { Agent } from 'node:https';
import { rootCertificates } from 'node:tls';
import { postWebhook } from '../../src/delivery/post-webhook.js';
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
