import { expect } from 'chai';
import { requestHash } from '../../src/commands/idempotency.js';
import { TestService, validLead } from '../support/service.js';

// What an Idempotency-Key's stream keeps of the body it was first used with: a keyed fingerprint,
// never the body's plain SHA-256. The body holds the consumer's contacts, and the stream outlives
// an erasure; without the key store's secret the fingerprint confirms no guess.

describe('the Idempotency-Key fingerprint of a body', function () {
  this.timeout(30_000);
  let svc: TestService;
  let key: string;
  before(async () => {
    svc = await TestService.start();
    key = await svc.key('supplier', 'sup-1');
  });
  after(() => svc.stop());

  const claims = async (idempotencyKey: string) => {
    const stream = svc.service.contactHashes.keyedStream('idempotency', 'sup-1', idempotencyKey);
    return (await svc.service.store.readStream(stream)).filter((event) => event.type === 'IdempotencyKeyClaimed').map((event) => (event.data as { request_hash: string }).request_hash);
  };

  it('is keyed: the stream holds neither the body nor its plain hash, and a retry still replays while another body is refused', async function () {
    const body = JSON.stringify(validLead());
    const first = await svc.post(body, { 'x-api-key': key, 'idempotency-key': 'order-1' });
    expect(first.status, first.text).to.equal(201);
    const [fingerprint, ...more] = await claims('order-1');
    expect(more).to.deep.equal([]);
    expect(fingerprint).to.match(/^keyed:[0-9a-f]{64}$/);
    expect(fingerprint).to.not.contain(requestHash(Buffer.from(body)));

    const again = await svc.post(body, { 'x-api-key': key, 'idempotency-key': 'order-1' });
    expect(again.headers['idempotency-replayed']).to.equal('true');
    expect(again.body.lead_id).to.equal(first.body.lead_id);
    const other = await svc.post(validLead(), { 'x-api-key': key, 'idempotency-key': 'order-1' });
    expect([other.status, other.body.code]).to.deep.equal([422, 'IDEMPOTENCY_CONFLICT']);
    // The same lead serialised anew (its members in another order) is another body: compared byte for byte, and said so.
    const reordered = JSON.stringify(Object.fromEntries(Object.entries(JSON.parse(body) as Record<string, unknown>).reverse()));
    const anew = await svc.post(reordered, { 'x-api-key': key, 'idempotency-key': 'order-1' });
    expect([anew.status, anew.body.code], anew.text).to.deep.equal([422, 'IDEMPOTENCY_CONFLICT']);
    expect((anew.body.errors as Array<{ field: string; code: string }>).map((error) => [error.field, error.code])).to.deep.equal([['Idempotency-Key', 'other_body']]);
  });

  it('a key claimed with a plain hash (as before fingerprints were keyed) still replays its body and refuses another', async function () {
    const body = JSON.stringify(validLead());
    const stream = svc.service.contactHashes.keyedStream('idempotency', 'sup-1', 'order-2');
    const at = new Date().toISOString();
    const outcome = { lead_id: 4242, code: 'DUPLICATE', lead_status: 'rejected', sold: false, revenue: 0, currency: 'USD', errors: [{ field: 'email', code: 'duplicate', message: 'email was accepted recently' }] };
    await svc.service.store.append(stream, [
      { type: 'IdempotencyKeyClaimed', data: { request_hash: requestHash(Buffer.from(body)), at } },
      { type: 'IdempotentResponseRecorded', data: { at, outcome, trace_id: '0af7651916cd43dd8448eb211c803190' } },
    ]);
    const replay = await svc.post(body, { 'x-api-key': key, 'idempotency-key': 'order-2' });
    expect(replay.headers['idempotency-replayed'], replay.text).to.equal('true');
    expect([replay.status, replay.body.lead_id, replay.body.code]).to.deep.equal([409, 4242, 'DUPLICATE']);
    const other = await svc.post(validLead(), { 'x-api-key': key, 'idempotency-key': 'order-2' });
    expect([other.status, other.body.code]).to.deep.equal([422, 'IDEMPOTENCY_CONFLICT']);
  });

  it('a key whose first request died in flight 15 s ago: the retry is told how long until it can take the key over, not to come back in a second', async function () {
    const body = JSON.stringify(validLead());
    const stream = svc.service.contactHashes.keyedStream('idempotency', 'sup-1', 'order-3');
    // The body's fingerprint, as the service records it (it depends on the body alone), from a post under another key.
    const first = await svc.post(body, { 'x-api-key': key, 'idempotency-key': 'order-3-probe' });
    expect(first.status, first.text).to.equal(201);
    const [claim] = await svc.service.store.readStream(svc.service.contactHashes.keyedStream('idempotency', 'sup-1', 'order-3-probe'));
    // What a process that died 15 s ago, after claiming the key for this body, left.
    const at = new Date(Date.now() - 15_000).toISOString();
    await svc.service.store.append(stream, [{ type: 'IdempotencyKeyClaimed', data: { request_hash: (claim!.data as { request_hash: string }).request_hash, at } }]);
    const retry = await svc.post(body, { 'x-api-key': key, 'idempotency-key': 'order-3' });
    expect([retry.status, retry.body.code], retry.text).to.deep.equal([409, 'IDEMPOTENCY_CONFLICT']);
    expect(Number(retry.headers['retry-after'])).to.be.within(14, 15);
  });
});
