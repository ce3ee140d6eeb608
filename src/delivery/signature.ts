import { createHmac, timingSafeEqual } from 'node:crypto';

// The signature a buyer checks to know a delivery came from us and was not altered. The timestamp
// is signed with the body so a captured request cannot be replayed later with a fresh header; the
// buyer rejects timestamps too far from its own clock.

export const SIGNATURE_HEADER = 'X-Leadpost-Signature';
export const TIMESTAMP_HEADER = 'X-Leadpost-Timestamp';

/** `sha256=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>`. */
export function signDelivery(secret: string, timestamp: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

/** The buyer's side of `signDelivery`, in constant time; documents the scheme as code. */
export function verifyDelivery(secret: string, timestamp: string, body: string, signature: string): boolean {
  const expected = Buffer.from(signDelivery(secret, timestamp, body));
  const given = Buffer.from(signature);
  return expected.length === given.length && timingSafeEqual(expected, given);
}
