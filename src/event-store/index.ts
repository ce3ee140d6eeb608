import { codedEventStore, eventCodec } from '../events/codec/index.js';
import type { Logger } from 'pino';
import { type PersonalDataKeys, openPersonalDataKeys } from '../personal-data/index.js';
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
  /** The data keys to seal with, when the caller also opens leads with them (it closes them); else the store opens its own. */
  readonly personalData?: PersonalDataKeys | undefined;
}

/**
 * The store the configuration selects, behind the event codec with the key store of personal
 * data: whoever opens a store here (the service, every CLI command, a replay) appends events with
 * their personal fields encrypted, and reads them in their current layout, personal fields still
 * sealed (openLead opens them). Closing the store closes the key store it opened itself. The
 * EventStoreDB client is loaded only when it is used.
 */
export async function openEventStore(config: EventStoreConfig, options: OpenEventStoreOptions = {}): Promise<EventStore> {
  const given = options.personalData;
  const keys = given ?? (await openPersonalDataKeys(config));
  const closeKeys = () => (given ? Promise.resolve() : keys.close());
  try {
    return codedEventStore(await openAdapter(config, options), eventCodec(keys), { alsoClose: closeKeys });
  } catch (error) {
    await closeKeys();
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
