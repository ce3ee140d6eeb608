// Shared givens for the routing tests: a valid lead, its enrichment, and configs built through the
// real loader so every test also exercises the defaults.
import type { CheckOutcome, Enrichment } from '../../src/enrichment/check.js';
import type { NormalisedLead } from '../../src/leads/lead.js';
import { type LoadedRoutingConfig, RoutingConfigError, parseRoutingConfig } from '../../src/routing/load-config.js';

export function aLead(overrides: Partial<NormalisedLead> = {}): NormalisedLead {
  return {
    first_name: 'Maria',
    last_name: 'Lopez',
    email: 'maria.lopez@example.com',
    mobile: '+13105550143',
    mobile_national: '3105550143',
    zip: '90210',
    zip4: null,
    accident_state: 'CA',
    certificate_url: 'https://cert.trustedform.com/0123456789abcdef0123456789abcdef01234567',
    certificate_id: '0123456789abcdef0123456789abcdef01234567',
    sid: 'fb-campaign-7',
    s1: null,
    test: false,
    ...overrides,
  };
}

export function anEnrichment(results: Partial<Record<keyof Enrichment, CheckOutcome>> = {}): Enrichment {
  const check = (result: CheckOutcome) => ({ result, provider: 'fixture', detail: result });
  return {
    phone: check(results.phone ?? 'pass'),
    email: check(results.email ?? 'pass'),
    consent: check(results.consent ?? 'pass'),
  };
}

export function routing(file: object): LoadedRoutingConfig {
  return parseRoutingConfig(file, 'test.json');
}

/** The message lines a file is rejected with, or [] when it loads. */
export function problemsOf(file: unknown): string[] {
  try {
    parseRoutingConfig(file, 'test.json');
    return [];
  } catch (error) {
    if (!(error instanceof RoutingConfigError)) throw error;
    return error.message.split('\n');
  }
}
