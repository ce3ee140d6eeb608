import { Ajv, type ErrorObject } from 'ajv';
import type { PhoneNumber } from 'libphonenumber-js/max';
import { type CertificateUrlParse, DEFAULT_CERTIFICATE_HOSTS, parseCertificateUrl } from '../enrichment/consent.js';
import { type FieldError, oncePerField, repeatedFields, unknownFields } from './outcome.js';
import type { NormalisedLead } from './lead.js';
import { DEFAULT_PHONE_REGIONS, parseMobile } from './mobile.js';
import { CERTIFICATE_URL_ALIAS, LEAD_SCHEMA, PING_SCHEMA, type PostedLead, type PostedPing } from './schema.js';
import { toStateCode } from './us-states.js';

export type LeadValidation =
  /** `pingId`: the ping the lead is posted with, normalised; absent for a plain post. */
  | { readonly ok: true; readonly lead: NormalisedLead; readonly pingId?: string }
  | {
      readonly ok: false;
      readonly errors: FieldError[];
      /** The fields that did pass, so a rejected lead can still be reported by source and state. */
      readonly partial: { sid: string | null; s1: string | null; accident_state: string | null; test: boolean };
    };

/** `repeated`: the names the body has more than once (JSON keeps the last; a lead field given twice is refused). */
export type LeadValidator = (body: Readonly<Record<string, unknown>>, repeated?: readonly string[]) => LeadValidation;

export interface LeadValidatorOptions {
  readonly allowedCertificateHosts?: readonly string[];
  /** ISO 3166 codes of the regions whose numbers a mobile may be (libphonenumber's region of the number). */
  readonly allowedPhoneRegions?: readonly string[];
}

const MAX_UNKNOWN_FIELDS_NAMED = 20;

// A syntactically deliverable address: a dot-atom local part and a domain of LDH labels with an
// alphabetic (or punycode) top-level label. Quoted local parts and IP literals are not leads.
const EMAIL = /^[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+(?:[a-z]{2,63}|xn--[a-z0-9-]{1,59})$/;

function isLeadEmail(value: string): boolean {
  const at = value.lastIndexOf('@');
  return value.length <= 254 && at > 0 && at <= 64 && EMAIL.test(value);
}

// The apostrophes phones and word processors type in a name (O’Brien: right single quotation mark,
// modifier letter apostrophe, left single quotation mark) are the ASCII one a name keeps.
const collapse = (value: string) => value.trim().replace(/\s+/g, ' ').replace(/[\u2018\u2019\u02BC]/g, "'").normalize('NFC');

/**
 * What the service does to each string field before the field rules: the rules judge the field so
 * made, and the OpenAPI document publishes them in the form a client posts (src/docs/posted.ts).
 */
export const POSTED_AS = {
  first_name: 'collapsed',
  last_name: 'collapsed',
  email: 'lower-cased',
  mobile: 'trimmed',
  zip: 'trimmed',
  accident_state: 'state',
  certificate_url: 'trimmed',
  sid: 'trimmed',
  // A click id with a stray blank would count apart from itself in a report by s1.
  s1: 'trimmed',
  // A UUID's hex digits are one id in either case, and some systems store them in capitals.
  ping_id: 'lower-cased',
} as const;

export type PostedForm = (typeof POSTED_AS)[keyof typeof POSTED_AS];

const NORMALISERS: Readonly<Record<PostedForm, (value: string) => string>> = {
  collapsed: collapse,
  trimmed: (value) => value.trim(),
  'lower-cased': (value) => value.trim().toLowerCase(),
  state: (value) => {
    const trimmed = value.trim();
    return toStateCode(trimmed) ?? trimmed;
  },
};

/** Trimming and case folding that come before the field rules, applied only to strings. */
const PRE_NORMALISE: Readonly<Record<string, (value: string) => string>> = Object.fromEntries(
  Object.entries(POSTED_AS).map(([field, form]) => [field, NORMALISERS[form]]),
);

const MESSAGES: Readonly<Record<string, string>> = {
  required: 'is required',
  wrong_type: 'has the wrong type',
  too_short: 'is too short',
  too_long: 'is too long',
  invalid_format: 'is not in the expected format',
  unknown_state: 'is not a US state code or name',
  conflicting_alias: 'is given twice, as certificate_url and xxTrustedFormCertUrl, with different values',
};

/** `field` is one the schema names: an unknown member's name goes through unknownFields. */
function fieldError(field: string, code: string, detail?: string): FieldError {
  return { field, code, message: `${field} ${detail ?? MESSAGES[code]}` };
}

const FORMAT_DETAIL: Readonly<Record<string, string>> = {
  'lead-email': 'is not a valid e-mail address',
  'dialable-phone': 'is not a valid, dialable phone number',
  'consent-certificate-url': 'must be an https URL on an allowed certificate host ending in a 40-hex certificate id',
};

/** The body's members given more than once that are fields of the schema (the alias among them). */
const repeatedFieldErrors = (repeated: readonly string[], fields: Readonly<Record<string, unknown>>): FieldError[] =>
  repeatedFields(repeated, (name) => Object.hasOwn(fields, name) || name === CERTIFICATE_URL_ALIAS);


/** One error per failing field, in the words a supplier can act on; never the value itself. */
function toFieldErrors(errors: ErrorObject[], what: 'lead' | 'ping' = 'lead'): FieldError[] {
  const byField = new Map<string, FieldError>();
  const unknown: string[] = [];
  for (const error of errors) {
    if (error.keyword === 'additionalProperties') {
      unknown.push(String((error.params as { additionalProperty: string }).additionalProperty));
      continue;
    }
    const field =
      error.keyword === 'required' ? String((error.params as { missingProperty: string }).missingProperty) : error.instancePath.slice(1);
    if (byField.has(field)) continue;
    switch (error.keyword) {
      case 'required':
        byField.set(field, fieldError(field, 'required'));
        break;
      case 'type':
        byField.set(field, fieldError(field, 'wrong_type', `must be ${String((error.params as { type: unknown }).type).replace(',', ' or ')}`));
        break;
      case 'minLength':
        byField.set(field, fieldError(field, 'too_short'));
        break;
      case 'maxLength':
        byField.set(field, fieldError(field, 'too_long', `must be at most ${(error.params as { limit: number }).limit} characters`));
        break;
      case 'enum':
        byField.set(field, fieldError(field, 'unknown_state'));
        break;
      case 'format':
        byField.set(field, fieldError(field, 'invalid_format', FORMAT_DETAIL[(error.params as { format: string }).format]));
        break;
      default:
        byField.set(field, fieldError(field, 'invalid_format'));
    }
  }
  const result = [...byField.values()];
  result.push(...unknownFields(unknown.slice(0, MAX_UNKNOWN_FIELDS_NAMED), `a ${what} field`));
  if (unknown.length > MAX_UNKNOWN_FIELDS_NAMED) {
    const more = `${unknown.length - MAX_UNKNOWN_FIELDS_NAMED} more fields that are not ${what} fields`;
    // One entry per field: where names that are not field names are answered as `*` already, the
    // count goes on that entry rather than beside it (it would be dropped as a second `*`).
    const unnamed = result.findIndex((error) => error.field === '*');
    if (unnamed >= 0) result[unnamed] = { ...result[unnamed]!, message: `${result[unnamed]!.message}; and ${more}` };
    else result.push({ field: '*', code: 'unknown_field', message: `and ${more}` });
  }
  return result;
}

/**
 * Builds the lead validator: normalise the strings, check every field rule of the schema at once,
 * and return either the normalised lead or every failing field.
 */
export function createLeadValidator(options: LeadValidatorOptions = {}): LeadValidator {
  const hosts = options.allowedCertificateHosts ?? DEFAULT_CERTIFICATE_HOSTS;
  const regions = options.allowedPhoneRegions ?? DEFAULT_PHONE_REGIONS;
  const allowedRegions: ReadonlySet<string | undefined> = new Set(regions);
  const regionRule = `must be a number of one of these regions: ${regions.join(', ')}`;
  const ajv = new Ajv({ allErrors: true, allowUnionTypes: true, strict: true });
  ajv.addFormat('lead-email', isLeadEmail);
  // The formats keep what they parsed, so that building the normalised lead right after the check
  // does not parse the number (the costliest step of validation) or the URL a second time.
  let mobile: { value: string; parsed: PhoneNumber | undefined } | undefined;
  let certificate: { value: string; parsed: CertificateUrlParse } | undefined;
  const mobileOf = (value: string) => (mobile?.value === value ? mobile : (mobile = { value, parsed: parseMobile(value) })).parsed;
  const certificateOf = (value: string) =>
    (certificate?.value === value ? certificate : (certificate = { value, parsed: parseCertificateUrl(value, hosts) })).parsed;
  ajv.addFormat('dialable-phone', (value: string) => mobileOf(value) !== undefined);
  ajv.addFormat('consent-certificate-url', (value: string) => certificateOf(value).ok);
  const validate = ajv.compile<PostedLead>(LEAD_SCHEMA);

  return (body, repeated = []) => {
    const errors: FieldError[] = repeatedFieldErrors(repeated, LEAD_SCHEMA.properties);
    // Object.fromEntries defines own properties, so a `__proto__` key stays a plain (unknown) field.
    const input: Record<string, unknown> = Object.fromEntries(
      Object.entries(body).map(([key, value]) => [key, typeof value === 'string' && Object.hasOwn(PRE_NORMALISE, key) ? PRE_NORMALISE[key]!(value) : value]),
    );
    if (Object.hasOwn(input, CERTIFICATE_URL_ALIAS)) {
      const alias = input[CERTIFICATE_URL_ALIAS];
      const aliasValue = typeof alias === 'string' ? alias.trim() : alias;
      if (Object.hasOwn(input, 'certificate_url') && input.certificate_url !== aliasValue) {
        errors.push(fieldError(CERTIFICATE_URL_ALIAS, 'conflicting_alias'));
      }
      input.certificate_url ??= aliasValue;
      delete input[CERTIFICATE_URL_ALIAS];
    }
    const valid = validate(input);
    // A valid, dialable number from elsewhere passes the format but is no lead here: its own rule,
    // named in its own words. The parse is the one the format kept.
    if (typeof input.mobile === 'string') {
      const parsed = mobileOf(input.mobile);
      if (parsed && !allowedRegions.has(parsed.country)) errors.push(fieldError('mobile', 'region_not_allowed', regionRule));
    }
    if (valid && errors.length === 0) {
      const lead = normalised(input, mobileOf(input.mobile)!, certificateOf(input.certificate_url));
      return typeof input.ping_id === 'string' ? { ok: true, lead, pingId: input.ping_id } : { ok: true, lead };
    }

    const all = oncePerField([...errors, ...toFieldErrors(validate.errors ?? [])]);
    const failed = new Set(all.map((e) => e.field));
    const passed = (field: string): string | null =>
      !failed.has(field) && typeof input[field] === 'string' ? (input[field] as string) : null;
    return {
      ok: false,
      errors: all,
      partial: { sid: passed('sid'), s1: clickId(passed('s1')), accident_state: passed('accident_state'), test: input.test === true },
    };
  };
}

function normalised(input: PostedLead, mobile: PhoneNumber, certificate: CertificateUrlParse): NormalisedLead {
  const [zip, zip4] = input.zip.split('-');
  return {
    first_name: input.first_name,
    last_name: input.last_name,
    email: input.email,
    mobile: mobile.number,
    mobile_national: mobile.nationalNumber,
    zip: zip!,
    zip4: zip4 ?? null,
    accident_state: input.accident_state,
    certificate_url: input.certificate_url,
    certificate_id: certificate.ok ? certificate.certificateId : '',
    sid: input.sid,
    s1: clickId(input.s1),
    test: input.test === true,
  };
}

/**
 * The click id as kept: one that trims to nothing is none, as one left out or null is, so that a
 * report by s1 has one row of leads without a click id, not a second one with an empty name.
 */
const clickId = (s1: string | null | undefined): string | null => (s1 === undefined || s1 === null || s1 === '' ? null : s1);

/** A ping's qualifying fields, normalised as a lead's are. */
export interface NormalisedPing {
  readonly zip: string;
  readonly accident_state: string;
  readonly sid: string;
  readonly s1: string | null;
  readonly test: boolean;
}

export type PingValidator = (body: Readonly<Record<string, unknown>>, repeated?: readonly string[]) => PingValidation;

type PingValidation = { readonly ok: true; readonly ping: NormalisedPing } | { readonly ok: false; readonly errors: FieldError[] };

/** The ping validator: the lead's rules for the few fields a ping has; a consumer field is an unknown field. */
export function createPingValidator(): PingValidator {
  const validate = new Ajv({ allErrors: true, allowUnionTypes: true, strict: true }).compile<PostedPing>(PING_SCHEMA);
  return (body, repeated = []) => {
    const given = repeatedFieldErrors(repeated, PING_SCHEMA.properties);
    const input: Record<string, unknown> = Object.fromEntries(
      Object.entries(body).map(([key, value]) => [key, typeof value === 'string' && Object.hasOwn(PRE_NORMALISE, key) ? PRE_NORMALISE[key]!(value) : value]),
    );
    if (!validate(input) || given.length > 0) return { ok: false, errors: oncePerField([...given, ...toFieldErrors(validate.errors ?? [], 'ping')]) };
    const ping = input as PostedPing;
    return { ok: true, ping: { zip: ping.zip.slice(0, 5), accident_state: ping.accident_state, sid: ping.sid, s1: clickId(ping.s1), test: ping.test === true } };
  };
}

/** The contacts that name a consumer (an erasure or access request), normalised as a posted lead's are. */
export interface ConsumerQuery {
  readonly email?: string;
  readonly mobile?: string;
}

/**
 * Checks and normalises a consumer's e-mail and mobile as the post path does (trimmed, lower-cased
 * e-mail; the mobile in E.164, a bare 10-digit number taken as US). At least one is needed; every
 * failing field is named, never with its value. Any region is accepted: erasing a number the
 * post path would now refuse is still erasing it.
 */
export function normaliseConsumer(input: Readonly<Record<string, unknown>>): { ok: true; consumer: ConsumerQuery } | { ok: false; errors: FieldError[] } {
  const errors: FieldError[] = [];
  const consumer: { email?: string; mobile?: string } = {};
  const { email, mobile } = input;
  if (email !== undefined && email !== null && email !== '') {
    const value = typeof email === 'string' ? PRE_NORMALISE.email!(email) : undefined;
    if (value === undefined) errors.push(fieldError('email', 'wrong_type', 'must be a string'));
    else if (isLeadEmail(value)) consumer.email = value;
    else errors.push(fieldError('email', 'invalid_format', FORMAT_DETAIL['lead-email']));
  }
  if (mobile !== undefined && mobile !== null && mobile !== '') {
    const parsed = typeof mobile === 'string' ? parseMobile(PRE_NORMALISE.mobile!(mobile), false) : undefined;
    if (typeof mobile !== 'string') errors.push(fieldError('mobile', 'wrong_type', 'must be a string'));
    else if (parsed) consumer.mobile = parsed.number;
    else errors.push(fieldError('mobile', 'invalid_format', FORMAT_DETAIL['dialable-phone']));
  }
  if (errors.length === 0 && !consumer.email && !consumer.mobile) {
    errors.push(fieldError('email', 'required', 'or mobile is required'), fieldError('mobile', 'required', 'or email is required'));
  }
  return errors.length > 0 ? { ok: false, errors } : { ok: true, consumer };
}
