import { EVENT_CODEC, codedEventStore } from '../events/codec/index.js';
import { EmbeddedEventStore } from './embedded/embedded-event-store.js';
import type { EventStore } from './port.js';

export * from './port.js';

export interface EventStoreConfig {
  readonly dataDir: string;
  /** `esdb://…`: use EventStoreDB instead of the embedded store. */
  readonly eventStoreUrl?: string | undefined;
}

/**
 * The store the configuration selects, behind the event codec: whoever opens a store here (the
 * service, every CLI command, a replay) appends and reads events in their current layout. The
 * EventStoreDB client is loaded only when it is used.
 */
export async function openEventStore(config: EventStoreConfig): Promise<EventStore> {
  return codedEventStore(await openAdapter(config), EVENT_CODEC);
}

async function openAdapter(config: EventStoreConfig): Promise<EventStore> {
  if (config.eventStoreUrl) {
    const { EventStoreDbEventStore } = await import('./eventstoredb.js');
    return EventStoreDbEventStore.connect(config.eventStoreUrl);
  }
  return EmbeddedEventStore.open(config.dataDir);
}
