import type { RecordedEvent } from '../event-store/port.js';
import type { LeadReceived } from '../events/lead-events.js';
import { deliveriesProjection } from './projections.js';

/**
 * A lead's row of the deliveries read model, folded from the lead's own stream with the
 * projection's own writes: what the read model holds once it has reached the stream's last event.
 * An answer that must show a change just recorded reads this, never a read model that may be behind.
 * Null when the lead has no delivery (not sold or bucketed, a test lead).
 */
export async function deliveryRowFromEvents(events: readonly RecordedEvent[]): Promise<Record<string, unknown> | null> {
  const first = events[0];
  const received = first?.type === 'LeadReceived' ? (first.data as LeadReceived['data']) : null;
  const context = { received: () => received, collection: (base: string) => base };
  let row: Record<string, unknown> | null = null;
  for (const event of events) {
    for (const write of await deliveriesProjection.handle(event, context)) {
      if (write.op === 'put') row = { ...write.doc };
      else if (write.op === 'set') row = { ...(row ?? {}), ...write.set };
    }
  }
  return row;
}
