// A second process for the contract suite: opens the store the environment names (the same one
// the test uses) and appends, printing one line per append that resolved, so the parent knows
// exactly which appends were acknowledged before it kills or inspects.
//   node append-child.js race STREAM REVISIONS     race the parent for each revision of STREAM
//   node append-child.js streams PREFIX COUNT N    COUNT streams of N events each, 8 at a time
import { openEventStore, WrongExpectedRevisionError } from '../../src/event-store/index.js';

const [mode, name, a, b] = process.argv.slice(2);
const store = await openEventStore({ dataDir: process.env.LEADPOST_DATA_DIR ?? './data', eventStoreUrl: process.env.EVENTSTORE_URL });
process.stdout.write('ready\n');

if (mode === 'race') {
  // Wait for the parent's go so both processes contend for the same revisions at once.
  await new Promise((resolve) => process.stdin.once('data', resolve));
  for (let revision = 0; revision < Number(a); revision++) {
    try {
      await store.append(name!, [{ type: 'Raced', data: { by: 'child', revision } }], {
        expectedRevision: revision === 0 ? 'no_stream' : revision - 1,
      });
      process.stdout.write(`won ${revision}\n`);
    } catch (error) {
      if (!(error instanceof WrongExpectedRevisionError)) throw error;
      process.stdout.write(`lost ${revision}\n`);
    }
  }
} else if (mode === 'streams') {
  const count = Number(a);
  const perStream = Number(b);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      const index = next++;
      const events = Array.from({ length: perStream }, (_, i) => ({ type: 'Written', data: { index, i, pad: 'x'.repeat(200) } }));
      await store.append(`${name}${index}`, events, { expectedRevision: 'no_stream' });
      process.stdout.write(`acked ${index}\n`);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
}
await store.close();
process.stdout.write('done\n');
