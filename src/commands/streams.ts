import { hash } from 'node:crypto';

/** A stream name for a value that must not appear in it (a phone number, an e-mail, a client key). */
export function hashedStream(prefix: string, ...parts: string[]): string {
  return `${prefix}-${hash('sha256', parts.join('\n'), 'hex')}`;
}
