import { expect } from 'chai';
import { requestHash } from '../../src/commands/idempotency.js';
import { LeadIdAllocator } from '../../src/commands/lead-ids.js';
import { hashedStream } from '../../src/commands/streams.js';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import { TestService } from '../support/service.js';
import { tempDir } from '../support/tmp.js';

// The idempotency stream once kept the HTTP answer itself (status and envelope). It now keeps the
// lead's outcome and the trace of the request that got it. A key answered by an older release,
// still within its 72 hours, must replay byte for byte what that release sent.

describe('IdempotentResponseRecorded schema 0 (an HTTP answer kept in the event)', function () {
  this.timeout(30_000);

  it('a key an older release answered replays that answer byte for byte', async function () {
    const dir = tempDir('idempotency-upcasting');
    let svc: TestService | undefined;
    try {
      const body = '{"first_name":"Ada"}';
      const at = new Date(Date.now() - 3_600_000).toISOString();
      // As the older release sent it, field for field and in its order.
      const envelope = {
        ok: false, trace_id: '0af7651916cd43dd8448eb211c803190', acceptance: 'rejected', lead_id: 77, lead_status: 'rejected', sold: false, revenue: 0,
        currency: 'USD', code: 'VERIFICATION_FAILED', message: 'Lead rejected: phone or e-mail verification failed.', Response: 'Failure',
        errors: [{ field: 'email', code: 'verification_failed', message: 'email failed e-mail verification' }],
      };
      const raw = await EmbeddedEventStore.open(dir.path);
      try {
        // As the older release left it: the lead's id taken from a block, the key under its plain name.
        await new LeadIdAllocator(raw, 100, 'older').nextId();
        await raw.append(hashedStream('idempotency', 'sup-1', 'order-8841'), [
          { type: 'IdempotencyKeyClaimed', data: { request_hash: requestHash(Buffer.from(body)), at } },
          { type: 'IdempotentResponseRecorded', data: { at, status: 422, envelope } },
        ]);
      } finally {
        await raw.close();
      }

      svc = await TestService.start({ dataDir: dir.path });
      const key = await svc.key('supplier', 'sup-1');
      const reply = await svc.post(body, { 'x-api-key': key, 'idempotency-key': 'order-8841' });
      expect(reply.status, reply.text).to.equal(422);
      expect(reply.headers['idempotency-replayed']).to.equal('true');
      expect(reply.text).to.equal(JSON.stringify(envelope));
      expect(reply.headers['x-trace-id'], 'the header names the replaying request').to.not.equal(envelope.trace_id);
    } finally {
      await svc?.stop();
      dir.remove();
    }
  });
});
