// Runs the three checks of a lead side by side; a slow or broken verifier costs at most `timeoutMs`
// and yields `unknown`, so enrichment can never fail a post.
import type { NormalisedLead } from '../leads/lead.js';
import type { CheckResult, Enrichment } from './check.js';
import { createConsentVerifier } from './consent.js';
import { createEmailVerifier, type MxResolver } from './email.js';
import { createHttpVerifier } from './http-provider.js';
import { createPhoneVerifier } from './phone.js';
import type { ConsentVerifier, EmailVerifier, PhoneVerifier, Verifier } from './verifier.js';

export type Enricher = (lead: NormalisedLead) => Promise<Enrichment>;

export interface EnricherOptions {
  readonly phone: PhoneVerifier;
  readonly email: EmailVerifier;
  readonly consent: ConsentVerifier;
  readonly timeoutMs?: number;
  /** Told every lead's results, for /metrics. */
  readonly countChecks?: ((enrichment: Enrichment) => void) | undefined;
}

const OUTCOMES: ReadonlySet<unknown> = new Set(['pass', 'fail', 'unknown']);

function isCheckResult(value: unknown): value is CheckResult {
  const r = value as Partial<CheckResult> | null;
  return typeof r === 'object' && r !== null && OUTCOMES.has(r.result)
    && typeof r.provider === 'string' && typeof r.detail === 'string';
}

const timedOut = (verifier: Verifier<string>): CheckResult => ({ result: 'unknown', provider: verifier.name, detail: 'timeout' });
const providerError = (verifier: Verifier<string>): CheckResult => ({ result: 'unknown', provider: verifier.name, detail: 'provider_error' });

export function createEnricher(options: EnricherOptions): Enricher {
  const timeoutMs = options.timeoutMs ?? 1000;
  const verifiers = [options.phone, options.email, options.consent] as const;
  return (lead) =>
    new Promise<Enrichment>((resolve) => {
      // One deadline, one abort signal and one promise for the three checks, which start together.
      // Each answer is taken by a callback: a chain of promises per check (and a race of each
      // against the deadline) made some twenty promises a post, for checks that usually answer at once.
      const controller = new AbortController();
      const inputs = [lead.mobile, lead.email, lead.certificate_url] as const;
      const results: Array<CheckResult | undefined> = [undefined, undefined, undefined];
      let waiting = verifiers.length;
      let settled = false;
      const settle = (): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        const [phone, email, consent] = verifiers.map((verifier, index) => results[index] ?? timedOut(verifier));
        const enrichment = { phone: phone!, email: email!, consent: consent! };
        options.countChecks?.(enrichment);
        resolve(enrichment);
      };
      const timer = setTimeout(() => {
        // Settle first: the abort may make a verifier reject, and that must not count as a provider error.
        settle();
        controller.abort(new Error('verification timed out'));
      }, timeoutMs);
      verifiers.forEach((verifier, index) => {
        // An answer after the deadline is ignored: the check is `unknown` (timeout) already.
        const take = (result: CheckResult): void => {
          if (settled) return;
          results[index] = result;
          if (--waiting === 0) settle();
        };
        // A verifier that throws, rejects or answers nonsense is `unknown` (provider_error).
        let answer: Promise<CheckResult>;
        try {
          answer = verifier.verify(inputs[index]!, controller.signal);
        } catch {
          take(providerError(verifier));
          return;
        }
        Promise.resolve(answer).then(
          (result) => take(isCheckResult(result) ? result : providerError(verifier)),
          () => take(providerError(verifier)),
        );
      });
    });
}

export interface DefaultEnricherOptions {
  readonly resolver?: MxResolver;
  readonly mxTimeoutMs?: number;
  /** See EmailVerifierOptions.canaryDomain. */
  readonly mxCanaryDomain?: string | null;
  readonly allowedCertificateHosts?: readonly string[];
  /** When set, the phone check goes to this HTTP provider instead of libphonenumber. */
  readonly phoneProviderUrl?: string;
  /** When set, the e-mail check goes to this HTTP provider instead of the list + MX lookup. */
  readonly emailProviderUrl?: string;
  readonly timeoutMs?: number;
  readonly countChecks?: EnricherOptions['countChecks'];
}

function httpVerifier(url: string, timeoutMs: number): Verifier<string> {
  return createHttpVerifier({ name: `http:${new URL(url).host}`, url, timeoutMs });
}

export function createDefaultEnricher(options: DefaultEnricherOptions = {}): Enricher {
  const timeoutMs = options.timeoutMs ?? 1000;
  return createEnricher({
    phone: options.phoneProviderUrl ? httpVerifier(options.phoneProviderUrl, timeoutMs) : createPhoneVerifier(),
    email: options.emailProviderUrl
      ? httpVerifier(options.emailProviderUrl, timeoutMs)
      : createEmailVerifier({ resolver: options.resolver, mxTimeoutMs: options.mxTimeoutMs, canaryDomain: options.mxCanaryDomain }),
    consent: createConsentVerifier({ allowedHosts: options.allowedCertificateHosts }),
    timeoutMs,
    countChecks: options.countChecks,
  });
}

/** Phone or e-mail `fail` rejects the lead; consent `fail` and any `unknown` pass, left to buyer requirements. */
export function verificationFailed(enrichment: Enrichment): boolean {
  return enrichment.phone.result === 'fail' || enrichment.email.result === 'fail';
}
