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
}

const OUTCOMES: ReadonlySet<unknown> = new Set(['pass', 'fail', 'unknown']);

function isCheckResult(value: unknown): value is CheckResult {
  const r = value as Partial<CheckResult> | null;
  return typeof r === 'object' && r !== null && OUTCOMES.has(r.result)
    && typeof r.provider === 'string' && typeof r.detail === 'string';
}

const timedOut = (verifier: Verifier<string>): CheckResult => ({ result: 'unknown', provider: verifier.name, detail: 'timeout' });

/** One verifier's answer, or `unknown` when it throws, answers nonsense or misses the lead's deadline. */
function runCheck(verifier: Verifier<string>, input: string, signal: AbortSignal, deadline: Promise<void>): Promise<CheckResult> {
  const checked = Promise.resolve()
    .then(() => verifier.verify(input, signal))
    .then(
      (r) => (isCheckResult(r) ? r : { result: 'unknown', provider: verifier.name, detail: 'provider_error' } as const),
      () => ({ result: 'unknown', provider: verifier.name, detail: 'provider_error' } as const),
    );
  return Promise.race([checked, deadline.then(() => timedOut(verifier))]);
}

export function createEnricher(options: EnricherOptions): Enricher {
  const timeoutMs = options.timeoutMs ?? 1000;
  return async (lead) => {
    // One deadline and one abort signal for the three checks, which start together: a controller
    // and a timer per check would be three of each on every post, for the same deadline.
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        // Settle first: the abort may make a verifier reject, and that must not count as a provider error.
        resolve();
        controller.abort(new Error('verification timed out'));
      }, timeoutMs);
    });
    try {
      const [phone, email, consent] = await Promise.all([
        runCheck(options.phone, lead.mobile, controller.signal, deadline),
        runCheck(options.email, lead.email, controller.signal, deadline),
        runCheck(options.consent, lead.certificate_url, controller.signal, deadline),
      ]);
      return { phone, email, consent };
    } finally {
      clearTimeout(timer);
    }
  };
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
  });
}

/** Phone or e-mail `fail` rejects the lead; consent `fail` and any `unknown` pass, left to buyer requirements. */
export function verificationFailed(enrichment: Enrichment): boolean {
  return enrichment.phone.result === 'fail' || enrichment.email.result === 'fail';
}
