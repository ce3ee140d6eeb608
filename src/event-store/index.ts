import { codedEventStore, eventCodec } from '../events/codec/index.js';
import type { Logger } from 'pino';
import { openPersonalDataKeys } from '../personal-data/index.js';
import { EmbeddedEventStore } from './embedded/embedded-event-store.js';
import type { EventStore } from './port.js';

export * from './port.js';

export interface EventStoreConfig {
  readonly dataDir: string;
  /** `esdb://…`: use EventStoreDB instead of the embedded store. */
  readonly eventStoreUrl?: string | undefined;
  /** The key store of personal data is a MongoDB collection when set, else keys.db in the data dir. */
  readonly mongoUrl?: string | undefined;
  /** The master key that wraps the data keys; master.key in the data dir when unset. */
  readonly masterKeyFile?: string | undefined;
}

export interface OpenEventStoreOptions {
  /** Where EventStoreDB's `$all` subscriptions say that they resubscribe after a drop. */
  readonly logger?: Logger | undefined;
}

/**
 * The store the configuration selects, behind the event codec with the key store of personal
 * data: whoever opens a store here (the service, every CLI command, a replay) appends events with
 * their personal fields encrypted, and reads them in their current layout and in clear. Closing
 * the store closes the key store. The EventStoreDB client is loaded only when it is used.
 */
export async function openEventStore(config: EventStoreConfig, options: OpenEventStoreOptions = {}): Promise<EventStore> {
  const keys = await openPersonalDataKeys(config);
  try {
    return codedEventStore(await openAdapter(config, options), eventCodec(keys), { alsoClose: () => keys.close() });
  } catch (error) {
    await keys.close();
    throw error;
  }
}

async function openAdapter(config: EventStoreConfig, options: OpenEventStoreOptions): Promise<EventStore> {
  if (config.eventStoreUrl) {
    const { EventStoreDbEventStore } = await import('./eventstoredb.js');
    return EventStoreDbEventStore.connect(config.eventStoreUrl, { logger: options.logger });
  }
  return EmbeddedEventStore.open(config.dataDir);
}
