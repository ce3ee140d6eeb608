import { type NumberType, type PhoneNumber, isSupportedCountry, parsePhoneNumberFromString } from 'libphonenumber-js/max';
import { TwoGenerationCache } from '../two-generation-cache.js';

/**
 * Where the consumers of accident leads are by default: the regions of the North American
 * numbering plan that are the US, Canada and the US territories (Puerto Rico, the US Virgin
 * Islands, Guam, American Samoa, the Northern Mariana Islands). Other +1 regions (Jamaica, the
 * Bahamas, …) are not among them.
 */
export const DEFAULT_PHONE_REGIONS: readonly string[] = ['US', 'CA', 'PR', 'VI', 'GU', 'AS', 'MP'];

/** True for an ISO 3166 region code (upper case) that libphonenumber has numbering metadata for. */
export function isPhoneRegion(code: string): boolean {
  return /^[A-Z]{2}$/.test(code) && isSupportedCountry(code);
}

// Parsing a number with libphonenumber (and deciding it is valid) is costly, and both validation
// and the phone check need it for every lead. Validation keeps what it parsed for the phone check,
// by E.164 number, with the number's type; a check of a number it never saw parses it itself.
const recent = new TwoGenerationCache<string, KnownMobile>(1024);

/** A valid number and its type (libphonenumber's; undefined where its metadata has no types). */
export interface KnownMobile {
  readonly phone: PhoneNumber;
  readonly type: NumberType;
}

/**
 * The type of a parsed number, and whether it is valid, from one look at the metadata. `isValid()`
 * and `getType()` each match the number against its region's patterns (the same work, the costliest
 * part of a parse after the parse itself): a number with a type is valid, so only a number without
 * one is asked `isValid()`.
 */
function known(parsed: PhoneNumber): KnownMobile | undefined {
  const type = parsed.getType();
  return type !== undefined || parsed.isValid() ? { phone: parsed, type } : undefined;
}

/**
 * A dialable number: international, or a bare national number taken as US (+1). Whether its region
 * is allowed is the validator's rule. `remember: false` for a number that is not a lead's (an
 * erasure's or an access request's): it is not kept in memory for a phone check that never comes.
 */
export function parseMobile(value: string, remember = true): PhoneNumber | undefined {
  if (value.length > 32) return undefined;
  // extract: false, so that a number inside other text ("call 213-555-0189 now") is not taken for the field.
  const parsed = parsePhoneNumberFromString(value, { defaultCountry: 'US', extract: false });
  // An extension ("ext. 12") is a desk's, not a mobile's: dropped, the number would reach the wrong phone.
  const mobile = parsed && parsed.ext === undefined && known(parsed);
  if (!mobile) return undefined;
  if (remember) recent.set(mobile.phone.number, mobile);
  return mobile.phone;
}

/** The valid number with this E.164 form and its type, or undefined: from validation's parse when there was one. */
export function validE164(e164: string): KnownMobile | undefined {
  const remembered = recent.get(e164);
  if (remembered) return remembered;
  const parsed = parsePhoneNumberFromString(e164);
  return parsed && known(parsed);
}
