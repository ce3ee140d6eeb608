// Whether a failure means a store cannot be reached now — the event store or the read-model store —
// as the ports say it: the HTTP shell answers it with 503 and Retry-After, and the append metrics
// count it as unavailable. How an adapter decides that a client's error is an outage is the
// adapter's own business; what reaches here is already a port error.

import { causeChain } from './error-causes.js';
import { EventStoreUnavailableError } from './event-store/port.js';
import { ReadModelUnavailableError } from './read-models/port.js';

/**
 * True whether the command let the store's error through or wrapped it: the cause chain is
 * searched. The name check covers a second copy of a port module (e.g. two installs in a monorepo)
 * where `instanceof` would fail.
 */
export function isStoreUnavailable(error: unknown): boolean {
  for (const current of causeChain(error)) {
    if (current instanceof EventStoreUnavailableError || current.name === 'EventStoreUnavailableError') return true;
    if (current instanceof ReadModelUnavailableError || current.name === 'ReadModelUnavailableError') return true;
  }
  return false;
}
