// Events are stored as JSON text by both adapters. A value JSON cannot hold (undefined as the whole
// data, a BigInt, a cycle) is refused by the append with this one error, before anything is written.

/**
 * An append whose event data or metadata is not JSON. The message names the stream and the event
 * type (neither holds personal data) and what JSON.stringify objected to, never a value.
 */
export function notJsonError(streamId: string, type: string, cause?: unknown): TypeError {
  const why = cause instanceof Error ? cause.message.split('\n')[0] : 'it has no JSON form';
  return new TypeError(`cannot append ${type} to ${streamId}: its data or metadata is not JSON (${why})`, cause === undefined ? undefined : { cause });
}

/** A value JSON.stringify answers with undefined rather than text: it cannot be an event's data. */
export function hasNoJsonForm(value: unknown): boolean {
  return value === undefined || typeof value === 'function' || typeof value === 'symbol';
}
