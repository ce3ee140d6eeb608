import { EVENT_CODEC, codedEventStore } from '../events/codec/index.js';
import type { Logger } from 'pino';
import { EmbeddedEventStore } from './embedded/embedded-event-store.js';
import type { EventStore } from './port.js';

export * from './port.js';

export interface EventStoreConfig {
  readonly dataDir: string;
  /** `esdb://…`: use EventStoreDB instead of the embedded store. */
  readonly eventStoreUrl?: string | undefined;
}

export interface OpenEventStoreOptions {
  /** Where EventStoreDB's `$all` subscriptions say that they resubscribe after a drop. */
  readonly logger?: Logger | undefined;
}

/**
 * The store the configuration selects, behind the event codec: whoever opens a store here (the
 * service, every CLI command, a replay) appends and reads events in their current layout. The
 * EventStoreDB client is loaded only when it is used.
 */
export async function openEventStore(config: EventStoreConfig, options: OpenEventStoreOptions = {}): Promise<EventStore> {
  return codedEventStore(await openAdapter(config, options), EVENT_CODEC);
}

async function openAdapter(config: EventStoreConfig, options: OpenEventStoreOptions): Promise<EventStore> {
  if (config.eventStoreUrl) {
    const { EventStoreDbEventStore } = await import('./eventstoredb.js');
    return EventStoreDbEventStore.connect(config.eventStoreUrl, { logger: options.logger });
  }
  return EmbeddedEventStore.open(config.dataDir);
}
