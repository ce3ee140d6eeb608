// Run under a file-size limit (`ulimit -f`), as a disk that fills up: appends 64 KiB events to the
// embedded store of LEADPOST_DATA_DIR until one fails, and prints that failure as one JSON line.
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';

const store = await EmbeddedEventStore.open(process.env.LEADPOST_DATA_DIR!);
const filler = 'x'.repeat(64 * 1024);
let appended = 0;
for (;;) {
  try {
    await store.append(`filler-${appended}`, [{ type: 'Filled', data: { filler } }], { expectedRevision: 'no_stream' });
    appended += 1;
  } catch (error) {
    const cause = (error as Error).cause as { code?: unknown } | undefined;
    process.stdout.write(`${JSON.stringify({ appended, name: (error as Error).name, message: (error as Error).message, code: cause?.code ?? null })}\n`);
    break;
  }
}
await store.close().catch(() => {});
