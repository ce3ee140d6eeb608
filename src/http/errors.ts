// Rejections decided by the shell itself travel as ShellError so that one middleware turns every
// failure, expected or not, into the envelope; nothing downstream writes an error body by hand.

import { EventStoreUnavailableError } from '../event-store/port.js';
import { ReadModelUnavailableError } from '../read-models/port.js';
import type { FieldError, OutcomeCode } from './envelope.js';

export class ShellError extends Error {
  override readonly name = 'ShellError';
  constructor(
    readonly code: OutcomeCode,
    readonly headers: Readonly<Record<string, string>> = {},
    readonly detail?: string,
    /** Named failing inputs (query parameters of read-back routes), shown to the caller. */
    readonly errors?: FieldError[],
    /** Replaces the code's default message, for the caller (never internal detail). */
    readonly publicMessage?: string,
  ) {
    super(detail ?? code);
  }
}

const MAX_CAUSE_DEPTH = 8;

/**
 * A store that cannot be reached — the event store or the read-model store a read-back route
 * reads — is retryable (503), whether the command let the store's error through or wrapped it: the
 * cause chain is searched. The name check covers a second copy of a port module (e.g. two installs
 * in a monorepo) where `instanceof` would fail.
 */
export function isUnavailable(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; current instanceof Error && depth < MAX_CAUSE_DEPTH; depth++) {
    if (current instanceof EventStoreUnavailableError || current.name === 'EventStoreUnavailableError') return true;
    if (current instanceof ReadModelUnavailableError || current.name === 'ReadModelUnavailableError') return true;
    current = current.cause;
  }
  return false;
}
