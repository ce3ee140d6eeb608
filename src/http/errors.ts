// Rejections decided by the shell itself travel as ShellError so that one middleware turns every
// failure, expected or not, into the envelope; nothing downstream writes an error body by hand.
// A store that cannot be reached is no ShellError: the shell asks isStoreUnavailable
// (src/store-unavailable.ts), which the append metrics share.

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
