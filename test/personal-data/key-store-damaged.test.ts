import Database from 'better-sqlite3';
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { closeSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { ALWAYS_OPEN_ROUTING, validLead } from '../support/service.js';
import { tempDir } from '../support/tmp.js';
import { until } from '../support/until.js';
import { Client } from '../reliability/support/client.js';
import { ServerProcess, createKey, writeRouting } from '../reliability/support/server-process.js';

// A key store that answers the readiness probe (its header, its secrets, its write lock) while
// every read and write of the keys fails: keys.db's pages of data keys damaged, as a bad disk or a
// botched restore leaves them. Every post and every lead read is then 503; /readyz must say so
// (named key_store), so that the load balancer takes the instance out, instead of 200 for good.

describe('a key store whose keys cannot be read', function () {
  this.timeout(90_000);
  const client = new Client(4);
  const dir = tempDir('key-store-damaged');
  let server: ServerProcess | undefined;

  after(async function () {
    await server?.kill();
    client.destroy();
    dir.remove();
  });

  it('/readyz turns 503 naming key_store once every use of the keys has failed for READY_APPEND_FAILURE_SECONDS, though the probe still answers', async function () {
    const routingFile = writeRouting(dir.path, ALWAYS_OPEN_ROUTING);
    const supplier = await createKey(dir.path, 'supplier', 'sup-a');
    const env = { READY_APPEND_FAILURE_SECONDS: '1' };
    server = await ServerProcess.start({ dataDir: dir.path, routingFile, env });
    const posted = await client.post(server.httpsPort, validLead(), { 'x-api-key': supplier.key });
    expect(posted.status, posted.text).to.equal(201);
    expect((await server.stop()).code).to.equal(0);

    // The data keys' pages (not the root, the schema or the secrets) overwritten with noise.
    const db = new Database(join(dir.path, 'keys.db'));
    const pages = db.prepare<[], { pageno: number; size: number }>("SELECT pageno, pgsize AS size FROM dbstat WHERE name = 'data_keys' AND pagetype = 'leaf'").all();
    db.close();
    expect(pages.length, 'leaf pages of data_keys').to.be.greaterThan(0);
    const file = openSync(join(dir.path, 'keys.db'), 'r+');
    for (const { pageno, size } of pages) writeSync(file, randomBytes(size), 0, size, (pageno - 1) * size);
    closeSync(file);

    server = await ServerProcess.start({ dataDir: dir.path, routingFile, env });
    const port = server.httpsPort;
    const ready = async () => (await client.request(port, 'GET', '/readyz')).status;
    // Posts keep failing on the keys, each answered 503; within a few seconds /readyz follows.
    await until(
      '/readyz to answer 503 while posts fail on the keys',
      async () => {
        const post = await client.post(port, validLead(), { 'x-api-key': supplier.key });
        expect(post.status, post.text).to.equal(503);
        return (await ready()) === 503;
      },
      20_000,
      100,
    );
    const readiness = await client.request(port, 'GET', '/readyz');
    const keyStore = (readiness.body.checks as Record<string, { ok: boolean; detail: string }>).key_store!;
    expect(keyStore.ok).to.equal(false);
    expect(keyStore.detail).to.match(/^it answers a probe, but every read and write of the keys has failed for [\d.]+ s \(\d+ uses\)/);
    expect(readiness.text).to.not.match(/malformed/);
  });
});
