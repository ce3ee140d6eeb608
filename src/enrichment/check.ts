// What each verification of a lead found.

export type CheckOutcome = 'pass' | 'fail' | 'unknown';

export interface CheckResult {
  readonly result: CheckOutcome;
  /** Which provider answered, e.g. `libphonenumber`, `dns-mx`, `http:<host>`. */
  readonly provider: string;
  /** A short machine-readable reason, e.g. `mobile`, `toll_free`, `disposable_domain`, `timeout`. Never PII. */
  readonly detail: string;
}

export type CheckName = 'phone' | 'email' | 'consent';

export type Enrichment = Readonly<Record<CheckName, CheckResult>>;
