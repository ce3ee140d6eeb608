export type { CheckName, CheckOutcome, CheckResult, Enrichment } from './check.js';
export type { ConsentVerifier, EmailVerifier, PhoneVerifier, Verifier } from './verifier.js';
export { checkPhone, createPhoneVerifier } from './phone.js';
export {
  createDnsMxResolver,
  createEmailVerifier,
  isDisposableDomain,
  type EmailVerifierOptions,
  type MxRecord,
  type MxResolver,
} from './email.js';
export { DEFAULT_CERTIFICATE_HOSTS, createConsentVerifier, parseCertificateUrl, type CertificateUrlParse } from './consent.js';
export { createHttpVerifier, type HttpVerifierOptions } from './http-provider.js';
export {
  createDefaultEnricher,
  createEnricher,
  verificationFailed,
  type DefaultEnricherOptions,
  type Enricher,
  type EnricherOptions,
} from './enricher.js';
