// The seam between the HTTP shell and the post-lead command: the shell has authenticated the
// caller and turned the bytes into a JSON object; the command owns everything after that.

import type { DecisionEnvelope } from './envelope.js';
import type { Principal } from './principal.js';

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
  /** The exact bytes received, for idempotency fingerprints. */
  readonly rawBody: Buffer;
  readonly idempotencyKey: string | undefined;
}

export interface PostLeadResponse {
  readonly status: number;
  readonly envelope: DecisionEnvelope;
  /** Extra response headers (`Idempotency-Replayed`, `Retry-After`, …). */
  readonly headers?: Record<string, string>;
}

export type PostLead = (request: PostLeadRequest) => Promise<PostLeadResponse>;
