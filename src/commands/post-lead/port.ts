// The seam between the HTTP shell and the post-lead command: the shell has authenticated the
// caller and turned the bytes into a JSON object; the command owns everything after that, and
// answers in the lead business's terms. The shell alone turns the answer into a status and the
// decision envelope.

import type { Principal } from '../../keys/principal.js';
import type { LeadOutcome } from '../../leads/outcome.js';

export interface PostLeadRequest {
  readonly principal: Principal;
  readonly traceId: string;
  /**
   * The parsed body. Every object in it (this one and nested ones) has a null prototype, so keys
   * such as `__proto__` or `constructor` are plain own data properties: spreading, `Object.keys`
   * and `Object.hasOwn` are safe, and nothing is inherited. Use `Object.hasOwn(body, k)`, not
   * `body.hasOwnProperty(k)`.
   */
  readonly body: Record<string, unknown>;
  /** The names `body` was sent with more than once (it holds the last value of each). */
  readonly repeated?: readonly string[];
  /** The exact bytes received, for idempotency fingerprints. */
  readonly rawBody: Buffer;
  readonly idempotencyKey: string | undefined;
}

export type PostLeadResult =
  /**
   * A lead was recorded (now, or by the first request with this Idempotency-Key: `replayed`, and
   * `traceId` is then that request's, so the answer is the original one).
   */
  | { readonly kind: 'recorded'; readonly outcome: LeadOutcome; readonly traceId: string; readonly replayed: boolean }
  /** The Idempotency-Key is still in flight, was used with another body, or is not a valid key. */
  | { readonly kind: 'idempotency_conflict'; readonly reason: 'other_body' | 'malformed_key' }
  /** The key's first request is still being answered, or its process died: retry after `retryAfterSeconds`. */
  | { readonly kind: 'idempotency_conflict'; readonly reason: 'in_flight'; readonly retryAfterSeconds: number }
  /** The lead's ping_id names no ping of this supplier: nothing was recorded. */
  | { readonly kind: 'ping_not_found' }
  /**
   * Its mobile or e-mail (`fields`) is claimed by a lead another process has not recorded yet (a
   * post under way, or one lost with a process that died), or a post of this one waiting for this
   * post's own claim: nothing was recorded; the claim lapses
   * within `retryAfterSeconds`, and a retry then is decided as any post.
   */
  | { readonly kind: 'contacts_pending'; readonly fields: readonly ('mobile' | 'email')[]; readonly retryAfterSeconds: number };

export type PostLead = (request: PostLeadRequest) => Promise<PostLeadResult>;
