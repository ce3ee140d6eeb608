// Makes, in its own process, every directory the service makes (the data dir for each embedded
// store, the master key's, the self-signed certificate's) under the path it is given, printing a
// JSON line for each: made, or the error. A process, so that one that never returns is killed
// rather than hang the tests (Node's recursive mkdir spins for ever under /proc).
import { join } from 'node:path';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import { loadOrCreateTls } from '../../src/http/tls.js';
import { makeDirectory } from '../../src/make-directory.js';
import { EmbeddedKeyStore } from '../../src/personal-data/embedded-key-store.js';
import { loadOrCreateMasterKey } from '../../src/personal-data/master-key.js';
import { EmbeddedReadModelStore } from '../../src/read-models/embedded.js';

const dir = process.argv[2]!;
const makers: Record<string, () => Promise<unknown>> = {
  directory: async () => makeDirectory(join(dir, 'data'), 0o700),
  events: async () => (await EmbeddedEventStore.open(join(dir, 'events'))).close(),
  read_models: async () => EmbeddedReadModelStore.open(join(dir, 'read-models')).close(),
  keys: async () => EmbeddedKeyStore.open(join(dir, 'keys')).close(),
  master_key: () => loadOrCreateMasterKey(join(dir, 'master', 'master.key')),
  tls: () => loadOrCreateTls({ dataDir: join(dir, 'certificate') }),
};
for (const [what, make] of Object.entries(makers)) {
  try {
    await make();
    process.stdout.write(`${JSON.stringify({ what, made: true })}\n`);
  } catch (error) {
    process.stdout.write(`${JSON.stringify({ what, error: (error as Error).message })}\n`);
  }
}
