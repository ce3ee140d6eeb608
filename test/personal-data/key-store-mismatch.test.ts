import { expect } from 'chai';
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import { ContactHashes, KeyStoreMismatchError, SECRET_CHECK } from '../../src/personal-data/contact-hashes.js';
import { openPersonalDataKeys } from '../../src/personal-data/index.js';
import { ALWAYS_OPEN_ROUTING } from '../support/service.js';
import { tempDir } from '../support/tmp.js';
import { runChild } from '../support/child.js';
import { BIN, ServerProcess, writeRouting } from '../reliability/support/server-process.js';

// The event store records which contact-hashes secret its contacts were hashed with (a keyed check,
// not the secret). A key store that is not the one the events go with (a restore that left keys.db
// out, another data dir's keys.db, a MONGODB_URL naming another database) made a new secret without
// a word: duplicates went uncaught, erasures missed every earlier lead. Now nothing starts on it.

const MISMATCH = /the key store \(keys\.db in LEADPOST_DATA_DIR, or MONGODB_URL's data_keys\) is not the one this event store's leads go with/;

describe('a key store that does not go with the event store', function () {
  this.timeout(60_000);

  it('a restore that left keys.db out: serve and the CLI refuse to start on it, saying which file to put back', async function () {
    const dir = tempDir('key-store-mismatch');
    try {
      const routingFile = writeRouting(dir.path, ALWAYS_OPEN_ROUTING);
      const first = await ServerProcess.start({ dataDir: dir.path, routingFile });
      expect((await first.stop()).code).to.equal(0);
      for (const file of readdirSync(dir.path).filter((name) => name.startsWith('keys.db'))) rmSync(join(dir.path, file));

      const env = { LEADPOST_DATA_DIR: dir.path, LEADPOST_ROUTING_FILE: routingFile, PORT: '0', HTTP_PORT: '0', HOST: '127.0.0.1', MX_LOOKUP: '0' };
      // Killed if it starts after all (the check broken), so that a failure leaves no service running.
      const child = runChild(['serve'], env, { script: BIN });
      const cutOff = setTimeout(() => child.process.kill('SIGKILL'), 20_000);
      const serve = await child;
      clearTimeout(cutOff);
      expect(serve.code).to.equal(1);
      expect(serve.stderr).to.match(MISMATCH);
      expect(serve.stderr).to.include('Put back the key store taken with these events');
      expect(serve.lines.some((line) => line.includes('"leadpost listening"'))).to.equal(false);

      const erase = await runChild(['erase', '--email', 'someone@example.com'], env, { script: BIN });
      expect(erase.code).to.equal(1);
      expect(erase.stderr).to.match(MISMATCH);
      expect(erase.stderr).to.not.include('someone@example.com');
    } finally {
      dir.remove();
    }
  });

  it('records the check once, however many instances open at the same time, and each later open compares with it', async function () {
    const [a, b] = [tempDir('secret-a'), tempDir('secret-b')];
    const store = await EmbeddedEventStore.open(a.path);
    const keys = await openPersonalDataKeys({ dataDir: a.path });
    const other = await openPersonalDataKeys({ dataDir: b.path });
    try {
      const opened = await Promise.all([0, 1, 2, 3].map(() => ContactHashes.open(keys, store)));
      expect(new Set(opened.map((hashes) => hashes.stream('email', 'same@example.com'))).size).to.equal(1);
      const recorded = await store.readStream(SECRET_CHECK.stream);
      expect(recorded.map((event) => event.type)).to.deep.equal([SECRET_CHECK.type]);
      expect((recorded[0]!.data as { check: string }).check).to.match(/^[0-9a-f]{32}$/);

      await ContactHashes.open(keys, store);
      const refused = await ContactHashes.open(other, store).then(
        () => null,
        (error: unknown) => error,
      );
      expect(refused).to.be.instanceOf(KeyStoreMismatchError);
      expect(await store.readStream(SECRET_CHECK.stream)).to.have.length(1);
    } finally {
      await store.close();
      await keys.close();
      await other.close();
      a.remove();
      b.remove();
    }
  });
});
