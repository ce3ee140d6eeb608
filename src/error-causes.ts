// An error and the errors it was caused by, as the stores wrap them: a port error around an
// adapter's, around the client's or SQLite's. Bounded, so that a cause chain with a cycle ends.

const MAX_CAUSE_DEPTH = 8;

/** The error, then its cause, and so on, while each is an Error: at most eight of them. */
export function* causeChain(error: unknown): Generator<Error> {
  let current = error;
  for (let depth = 0; current instanceof Error && depth < MAX_CAUSE_DEPTH; depth++) {
    yield current;
    current = current.cause;
  }
}
