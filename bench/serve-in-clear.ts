import { loadServiceConfig } from '../src/config.js';
import { EmbeddedEventStore } from '../src/event-store/embedded/embedded-event-store.js';
import { codedEventStore, eventCodec } from '../src/events/codec/index.js';
import { startService } from '../src/service.js';

// `leadpost serve` with one difference: the event codec seals nothing, so leads are stored with
// their personal fields in clear. Only for measuring what encryption costs a post, side by side
// with the real service; never a way to run leadpost.

const config = loadServiceConfig();
const store = codedEventStore(await EmbeddedEventStore.open(config.dataDir), eventCodec(null));
const service = await startService(config, { store });
process.once('SIGTERM', () => {
  void service
    .close()
    .then(() => store.close())
    .then(() => process.exit(0));
});
