// The verifier port: one per check, swappable for an external provider.
import type { CheckResult } from './check.js';

export interface Verifier<Input> {
  /** Reported as the provider when the enricher has to give up on this verifier (timeout, throw). */
  readonly name: string;
  /** Resolves with a result; the enricher still guards against a rejection or a hang. */
  verify(input: Input, signal: AbortSignal): Promise<CheckResult>;
}

/** Input: the E.164 number. */
export type PhoneVerifier = Verifier<string>;
/** Input: the normalised (trimmed, lower-cased) e-mail address. */
export type EmailVerifier = Verifier<string>;
/** Input: the consent certificate URL. */
export type ConsentVerifier = Verifier<string>;
