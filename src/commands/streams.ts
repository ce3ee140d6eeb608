import { createHash } from 'node:crypto';

/** A stream name for a value that must not appear in it (a phone number, an e-mail, a client key). */
export function hashedStream(prefix: string, ...parts: string[]): string {
  return `${prefix}-${createHash('sha256').update(parts.join('\n')).digest('hex')}`;
}

/** How many times an optimistic append is retried after losing a race before giving up. */
export const MAX_RACES = 50;
