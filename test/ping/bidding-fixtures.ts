import type { CapLedger } from '../../src/commands/caps.js';
import type { NormalisedPing } from '../../src/leads/validate.js';

// What the bidding tests give collectBids when only its buyers and their answers matter.

export const PING: NormalisedPing = { zip: '90210', accident_state: 'CA', sid: 'src-1', s1: null, test: false };
export const NOW = new Date('2026-03-02T15:00:00Z');

/** No buyer of these tests has caps: the ledger must never be asked. */
export const NO_CAPS = {
  hasRoom: () => {
    throw new Error('the cap ledger was asked about a buyer without caps');
  },
} as unknown as CapLedger;
