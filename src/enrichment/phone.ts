// Built-in phone check from libphonenumber metadata; the `max` build is the one that knows number types.
import { validE164 } from '../leads/mobile.js';
import type { CheckResult } from './check.js';
import type { PhoneVerifier } from './verifier.js';

const PROVIDER = 'libphonenumber';

// Numbers a consumer doesn't answer or that cost the caller money are not leads.
const REJECTED_TYPES: Readonly<Record<string, string>> = {
  TOLL_FREE: 'toll_free',
  PREMIUM_RATE: 'premium_rate',
  SHARED_COST: 'shared_cost',
};

export function checkPhone(e164: string): CheckResult {
  const known = validE164(e164);
  if (!known) return { result: 'fail', provider: PROVIDER, detail: 'invalid' };
  // The type validation found when it parsed the number: no second look at the metadata.
  const type = known.type;
  const rejected = type === undefined ? undefined : REJECTED_TYPES[type];
  if (rejected) return { result: 'fail', provider: PROVIDER, detail: rejected };
  return { result: 'pass', provider: PROVIDER, detail: type === undefined ? 'unknown_type' : type.toLowerCase() };
}

export function createPhoneVerifier(): PhoneVerifier {
  return { name: PROVIDER, verify: async (e164) => checkPhone(e164) };
}
