import { EmbeddedEventStore } from './embedded/embedded-event-store.js';
import type { EventStore } from './port.js';

export * from './port.js';

export interface EventStoreConfig {
  readonly dataDir: string;
  /** `esdb://…`: use EventStoreDB instead of the embedded store. */
  readonly eventStoreUrl?: string | undefined;
}

/** The store the configuration selects. The EventStoreDB client is loaded only when it is used. */
export async function openEventStore(config: EventStoreConfig): Promise<EventStore> {
  if (config.eventStoreUrl) {
    const { EventStoreDbEventStore } = await import('./eventstoredb.js');
    return EventStoreDbEventStore.connect(config.eventStoreUrl);
  }
  return EmbeddedEventStore.open(config.dataDir);
}
