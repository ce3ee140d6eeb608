// Every row of the lead field table through the real HTTPS server and the real
// store: good values come back 201 with the exact normal form in the LeadReceived event; bad values
// come back 422 INVALID naming exactly the failing fields, with a recorded rejected lead and
// messages that never echo what was sent.

import { expect } from 'chai';
import type { FieldError } from '../../src/http/envelope.js';
import type { NormalisedLead } from '../../src/leads/lead.js';
import { TestService } from '../support/service.js';
import { CERT_URL, envelopeProblems, leadEvents, uniqueLead, withRawMembers } from './helpers.js';

const HEX40 = '0123456789abcdef'.repeat(2) + '01234567';
const CERT_ID = HEX40;
const PING_URL = `https://ping.trustedform.com/${'fedcba9876543210'.repeat(2)}76543210`;

type Fields = Record<string, unknown>;

interface Good {
  readonly title: string;
  /** Fields set on a fresh unique valid lead. */
  readonly set?: Fields;
  /** Fields removed from it. */
  readonly unset?: readonly string[];
  /** The normal form expected in the stored lead, for the fields that differ from the base. */
  readonly expect: Partial<NormalisedLead>;
  readonly envelopeTest?: true;
}

interface Bad {
  readonly title: string;
  /** An object (sent as JSON) or JSON text. */
  readonly body: () => Fields | string;
  readonly errors: ReadonlyArray<{ field: string; code: string }>;
  /** The submitted values that must not be echoed anywhere in the response. */
  readonly values: readonly unknown[];
}

const A51 = 'A'.repeat(51);
const LONG_EMAIL = `${'a'.repeat(64)}@${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(57)}.com`; // 254
const TOO_LONG_EMAIL = `${'a'.repeat(64)}@${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(58)}.com`; // 255
const S1_255 = 's'.repeat(254) + 'é';
const S1_256 = 'q'.repeat(256);

const GOOD: Good[] = [
  // first_name, last_name
  ...(['first_name', 'last_name'] as const).flatMap((field): Good[] => [
    { title: `${field} José`, set: { [field]: 'José' }, expect: { [field]: 'José' } },
    { title: `${field} Zoë`, set: { [field]: 'Zoë' }, expect: { [field]: 'Zoë' } },
    { title: `${field} O'Brien-Smith`, set: { [field]: "O'Brien-Smith" }, expect: { [field]: "O'Brien-Smith" } },
    { title: `${field} O’Brien, as a phone types it: the apostrophe kept as '`, set: { [field]: 'O\u2019Brien' }, expect: { [field]: "O'Brien" } },
    { title: `${field} D\u02BCAmato (a modifier letter apostrophe) kept with '`, set: { [field]: 'D\u02BCAmato' }, expect: { [field]: "D'Amato" } },
    { title: `${field} St. John`, set: { [field]: 'St. John' }, expect: { [field]: 'St. John' } },
    { title: `${field} Nguyễn`, set: { [field]: 'Nguyễn' }, expect: { [field]: 'Nguyễn' } },
    { title: `${field} 李`, set: { [field]: '李' }, expect: { [field]: '李' } },
    { title: `${field} trimmed, inner spaces collapsed`, set: { [field]: '  Mary \t\n  Ann  ' }, expect: { [field]: 'Mary Ann' } },
    { title: `${field} decomposed accent composed (NFC)`, set: { [field]: 'Jose\u0301' }, expect: { [field]: 'Jos\u00e9' } },
    { title: `${field} one letter`, set: { [field]: 'Q' }, expect: { [field]: 'Q' } },
    { title: `${field} 50 letters`, set: { [field]: 'B'.repeat(50) }, expect: { [field]: 'B'.repeat(50) } },
  ]),
  // email
  // A value that reads as a member name (a string followed by a comma, not a colon) is no member.
  { title: 's1 whose value is a field name', set: { s1: 'zip' }, expect: { s1: 'zip' } },
  { title: 'email trimmed and lower-cased', set: { email: '  Ada.Upper@Example.COM ' }, expect: { email: 'ada.upper@example.com' } },
  { title: 'email with plus tag and subdomains', set: { email: "o'brien+leads@mail.example.co.uk" }, expect: { email: "o'brien+leads@mail.example.co.uk" } },
  { title: 'email of 254 characters', set: { email: LONG_EMAIL }, expect: { email: LONG_EMAIL } },
  { title: 'email with a punycode TLD', set: { email: 'user.idn@example.xn--p1ai' }, expect: { email: 'user.idn@example.xn--p1ai' } },
  // mobile
  { title: 'mobile +12135550143 (E.164)', set: { mobile: '+12135550143' }, expect: { mobile: '+12135550143', mobile_national: '2135550143' } },
  { title: 'mobile 2135550144 (bare 10 digits → +1)', set: { mobile: '2135550144' }, expect: { mobile: '+12135550144', mobile_national: '2135550144' } },
  { title: 'mobile (213) 555-0145', set: { mobile: '(213) 555-0145' }, expect: { mobile: '+12135550145', mobile_national: '2135550145' } },
  { title: 'mobile " +1 213-555-0146 " trimmed', set: { mobile: ' +1 213-555-0146 ' }, expect: { mobile: '+12135550146', mobile_national: '2135550146' } },
  { title: 'mobile 12135550147 (11 digits, leading 1)', set: { mobile: '12135550147' }, expect: { mobile: '+12135550147', mobile_national: '2135550147' } },
  { title: 'mobile of Canada +1 416 555 0143 (an allowed region by default)', set: { mobile: '+1 416 555 0143' }, expect: { mobile: '+14165550143', mobile_national: '4165550143' } },
  { title: 'mobile of Puerto Rico +1 787 234 5678 (an allowed region by default)', set: { mobile: '+1 787 234 5678' }, expect: { mobile: '+17872345678', mobile_national: '7872345678' } },
  { title: 'mobile of Canada given as 10 bare digits 6045550188 → +1', set: { mobile: '6045550188' }, expect: { mobile: '+16045550188', mobile_national: '6045550188' } },
  // zip
  { title: 'zip 90210', set: { zip: '90210' }, expect: { zip: '90210', zip4: null } },
  { title: 'zip 90210-1234 → zip + zip4', set: { zip: '90210-1234' }, expect: { zip: '90210', zip4: '1234' } },
  { title: 'zip trimmed', set: { zip: ' 10001 ' }, expect: { zip: '10001', zip4: null } },
  { title: 's1 "  click-9 " → click-9 (trimmed, so a report by s1 counts it with the others)', set: { s1: '  click-9 ' }, expect: { s1: 'click-9' } },
  // accident_state
  { title: 'accident_state ca → CA', set: { accident_state: 'ca' }, expect: { accident_state: 'CA' } },
  { title: 'accident_state California → CA', set: { accident_state: 'California' }, expect: { accident_state: 'CA' } },
  { title: 'accident_state " new york " → NY', set: { accident_state: ' new york ' }, expect: { accident_state: 'NY' } },
  { title: 'accident_state "NEW   YORK" → NY', set: { accident_state: 'NEW   YORK' }, expect: { accident_state: 'NY' } },
  { title: 'accident_state District of Columbia → DC', set: { accident_state: 'district of columbia' }, expect: { accident_state: 'DC' } },
  { title: 'accident_state Tx → TX', set: { accident_state: 'Tx' }, expect: { accident_state: 'TX' } },
  // The territories whose mobiles are accepted by default are places an accident happens too.
  { title: 'accident_state gu → GU', set: { accident_state: 'gu' }, expect: { accident_state: 'GU' } },
  { title: 'accident_state U.S. Virgin Islands → VI', set: { accident_state: 'U.S. Virgin Islands' }, expect: { accident_state: 'VI' } },
  { title: 'accident_state Northern Mariana Islands → MP', set: { accident_state: 'northern mariana islands' }, expect: { accident_state: 'MP' } },
  { title: 'accident_state AS (American Samoa) → AS', set: { accident_state: 'AS' }, expect: { accident_state: 'AS' } },
  // certificate_url
  { title: 'certificate_url on cert.trustedform.com', set: { certificate_url: CERT_URL }, expect: { certificate_url: CERT_URL, certificate_id: CERT_ID } },
  {
    title: 'certificate_url on ping.trustedform.com',
    set: { certificate_url: PING_URL },
    expect: { certificate_url: PING_URL, certificate_id: PING_URL.slice(-40) },
  },
  {
    title: 'certificate_url with upper-case hex: id lower-cased',
    set: { certificate_url: `https://cert.trustedform.com/${HEX40.toUpperCase()}` },
    expect: { certificate_url: `https://cert.trustedform.com/${HEX40.toUpperCase()}`, certificate_id: CERT_ID },
  },
  { title: 'certificate_url trimmed', set: { certificate_url: `  ${CERT_URL}\n` }, expect: { certificate_url: CERT_URL, certificate_id: CERT_ID } },
  {
    title: 'certificate_url given only as xxTrustedFormCertUrl',
    set: { xxTrustedFormCertUrl: PING_URL },
    unset: ['certificate_url'],
    expect: { certificate_url: PING_URL, certificate_id: PING_URL.slice(-40) },
  },
  {
    title: 'certificate_url and xxTrustedFormCertUrl both given, same value',
    set: { certificate_url: CERT_URL, xxTrustedFormCertUrl: ` ${CERT_URL} ` },
    expect: { certificate_url: CERT_URL, certificate_id: CERT_ID },
  },
  // sid
  { title: 'sid of 1 character', set: { sid: 'x' }, expect: { sid: 'x' } },
  { title: 'sid of 64 characters', set: { sid: 'S'.repeat(60) + '._-9' }, expect: { sid: 'S'.repeat(60) + '._-9' } },
  { title: 'sid trimmed', set: { sid: ' src-2 ' }, expect: { sid: 'src-2' } },
  // s1
  { title: 's1 absent → null', unset: ['s1'], expect: { s1: null } },
  { title: 's1 null → null', set: { s1: null }, expect: { s1: null } },
  { title: 's1 of 255 characters kept as sent', set: { s1: S1_255 }, expect: { s1: S1_255 } },
  { title: 's1 empty: no click id, null (one row of leads without one in a report by s1)', set: { s1: '' }, expect: { s1: null } },
  { title: 's1 only blanks: no click id, null', set: { s1: '   ' }, expect: { s1: null } },
  { title: 's1 with an emoji (a surrogate pair, escaped or not) kept', set: { s1: 'click-😀' }, expect: { s1: 'click-😀' } },
  // test
  { title: 'test true', set: { test: true }, expect: { test: true }, envelopeTest: true },
  { title: 'test false', set: { test: false }, expect: { test: false } },
  { title: 'test null → false', set: { test: null }, expect: { test: false } },
  { title: 'test absent → false', unset: ['test'], expect: { test: false } },
];

const REQUIRED = ['first_name', 'last_name', 'email', 'mobile', 'zip', 'accident_state', 'certificate_url', 'sid'] as const;

/** One bad value of one field on an otherwise valid lead. */
const bad = (field: string, value: unknown, code: string, title = `${field} ${JSON.stringify(value)?.slice(0, 40)}`): Bad => ({
  title,
  body: () => uniqueLead({ [field]: value }),
  errors: [{ field, code }],
  values: [value],
});

const without = (field: string): Bad => ({
  title: `${field} missing`,
  body: () => {
    const lead = uniqueLead();
    delete lead[field];
    return lead;
  },
  errors: [{ field, code: 'required' }],
  values: [],
});

const BAD: Bad[] = [
  ...REQUIRED.map(without),
  ...REQUIRED.flatMap((field) => [
    bad(field, 4242, 'wrong_type', `${field} a number`),
    bad(field, ['array-item-value'], 'wrong_type', `${field} an array`),
    bad(field, { nested: 'object-member-value' }, 'wrong_type', `${field} an object`),
    bad(field, null, 'wrong_type', `${field} null`),
    bad(field, true, 'wrong_type', `${field} a boolean`),
  ]),
  ...(['first_name', 'last_name'] as const).flatMap((field) => [
    bad(field, '', 'too_short', `${field} empty`),
    bad(field, '   ', 'too_short', `${field} only spaces`),
    bad(field, A51, 'too_long', `${field} 51 characters`),
    bad(field, 'Zelda42', 'invalid_format', `${field} with digits`),
    bad(field, 'Ada😀', 'invalid_format', `${field} with an emoji`),
    bad(field, 'Ada\u202eecalevoL', 'invalid_format', `${field} with an RTL override`),
    bad(field, '<script>', 'invalid_format', `${field} with markup`),
    bad(field, 'Ada_Lovelace', 'invalid_format', `${field} with an underscore`),
    // What a form puts for a name it does not have: no letter at all.
    ...['.', '-', "'", '...', '- -', "'.'", '\u0301'].map((placeholder) => bad(field, placeholder, 'invalid_format', `${field} ${JSON.stringify(placeholder)}: no letter`)),
  ]),
  bad('email', 'ada.lovelace.example.com', 'invalid_format', 'email without @'),
  bad('email', 'ada lovelace@example.com', 'invalid_format', 'email with a space'),
  bad('email', TOO_LONG_EMAIL, 'too_long', 'email of 255 characters'),
  bad('email', 'a@b', 'invalid_format', 'email a@b (no TLD)'),
  bad('email', 'ada@@example.com', 'invalid_format', 'email with two @'),
  bad('email', 'ada@example.', 'invalid_format', 'email with an empty TLD'),
  bad('email', '', 'invalid_format', 'email empty'),
  bad('mobile', '12345', 'invalid_format', 'mobile 12345'),
  bad('mobile', 'abcdefghij', 'invalid_format', 'mobile letters'),
  bad('mobile', '+12131234567', 'invalid_format', 'mobile: a US number that is invalid (exchange 123)'),
  bad('mobile', '(555) 555-5555', 'invalid_format', 'mobile: a US number that is invalid (area code 555)'),
  bad('mobile', '+1 213 555 01', 'invalid_format', 'mobile: too few digits'),
  bad('mobile', '2'.repeat(33), 'too_long', 'mobile of 33 characters'),
  bad('mobile', '', 'invalid_format', 'mobile empty'),
  bad('mobile', '+1 213 555 0143 ext. 12', 'invalid_format', 'mobile with an extension'),
  bad('mobile', '+12135550143;ext=1', 'invalid_format', 'mobile with an extension, RFC 3966 style'),
  bad('mobile', '+447911123456', 'region_not_allowed', 'mobile: a UK mobile +447911123456 is not of an allowed region'),
  bad('mobile', '+33 6 12 34 56 78', 'region_not_allowed', 'mobile: a French mobile is not of an allowed region'),
  bad('mobile', '+1 876 210 1234', 'region_not_allowed', 'mobile: a +1 number of Jamaica is not of an allowed region'),
  bad('zip', '1234', 'invalid_format', 'zip 1234'),
  bad('zip', '123456', 'invalid_format', 'zip 123456'),
  bad('zip', 'ABCDE', 'invalid_format', 'zip ABCDE'),
  bad('zip', '90210-12', 'invalid_format', 'zip 90210-12'),
  bad('zip', '90210 1234', 'invalid_format', 'zip "90210 1234"'),
  bad('accident_state', 'XX', 'unknown_state', 'accident_state XX'),
  bad('accident_state', 'Narnia', 'unknown_state', 'accident_state Narnia'),
  bad('accident_state', '', 'unknown_state', 'accident_state empty'),
  // Letters that only Unicode's case mappings make ASCII: a dotless ı, a long ſ, a Kelvin sign.
  bad('accident_state', '\u0131d', 'unknown_state', 'accident_state "ıd" (dotless i) is not Idaho'),
  bad('accident_state', '\u017Fc', 'unknown_state', 'accident_state "ſc" (long s) is not South Carolina'),
  bad('accident_state', '\u212Aansas', 'unknown_state', 'accident_state "Kansas" with a Kelvin sign is not Kansas'),
  bad('certificate_url', `http://cert.trustedform.com/${HEX40}`, 'invalid_format', 'certificate_url http://'),
  bad('certificate_url', `https://certs.example.com/${HEX40}`, 'invalid_format', 'certificate_url on another host'),
  bad('certificate_url', `https://cert.trustedform.com.evil.example/${HEX40}`, 'invalid_format', 'certificate_url on a look-alike host'),
  bad('certificate_url', `https://cert.trustedform.com:8443/${HEX40}`, 'invalid_format', 'certificate_url on another port'),
  bad('certificate_url', `https://user:pw@cert.trustedform.com/${HEX40}`, 'invalid_format', 'certificate_url with credentials'),
  bad('certificate_url', 'https://cert.trustedform.com/not-a-certificate', 'invalid_format', 'certificate_url without a 40-hex id'),
  bad('certificate_url', `https://cert.trustedform.com/${HEX40.slice(1)}`, 'invalid_format', 'certificate_url with a 39-hex id'),
  bad('certificate_url', `https://cert.trustedform.com/${HEX40.slice(1)}g`, 'invalid_format', 'certificate_url with a non-hex id'),
  bad('certificate_url', 'not a url at all', 'invalid_format', 'certificate_url not a URL'),
  bad('certificate_url', `https://cert.trustedform.com\\@evil.example/${HEX40}`, 'invalid_format', 'certificate_url whose host a backslash disguises (evil.example to strict parsers)'),
  bad('certificate_url', `https:cert.trustedform.com/${HEX40}`, 'invalid_format', 'certificate_url without // after the scheme'),
  // A URL is printable ASCII (RFC 3986); anything else was sent unencoded, and a buyer's strict parser may refuse it.
  bad('certificate_url', `https://cert.trustedform.com/${HEX40}?x=\ud800`, 'invalid_format', 'certificate_url with a lone surrogate in its query'),
  bad('certificate_url', `https://cert.trustedform.com/${HEX40}#\u0000`, 'invalid_format', 'certificate_url with a NUL in its fragment'),
  bad('certificate_url', `https://cert.trustedform.com/${HEX40}?a=b c`, 'invalid_format', 'certificate_url with a space inside'),
  bad('certificate_url', `https://cert.trustedform.com/${HEX40}?name=Jos\u00e9`, 'invalid_format', 'certificate_url with a character it should have percent-encoded'),
  {
    title: 'xxTrustedFormCertUrl alone, not a certificate URL',
    body: () => {
      const lead = uniqueLead({ xxTrustedFormCertUrl: 'ftp://alias.example/x' });
      delete lead.certificate_url;
      return lead;
    },
    errors: [{ field: 'certificate_url', code: 'invalid_format' }],
    values: ['ftp://alias.example/x'],
  },
  {
    title: 'certificate_url and xxTrustedFormCertUrl both given, different values',
    body: () => uniqueLead({ certificate_url: CERT_URL, xxTrustedFormCertUrl: PING_URL }),
    errors: [{ field: 'xxTrustedFormCertUrl', code: 'conflicting_alias' }],
    values: [PING_URL, CERT_URL],
  },
  bad('sid', 'x'.repeat(65), 'invalid_format', 'sid of 65 characters'),
  bad('sid', 'bad sid!', 'invalid_format', 'sid "bad sid!"'),
  bad('sid', '', 'invalid_format', 'sid empty'),
  bad('s1', S1_256, 'too_long', 's1 of 256 characters'),
  bad('s1', 'click-\ud800', 'invalid_format', 's1 with a lone high surrogate (\\ud800 in the JSON text)'),
  bad('s1', '\udc00click', 'invalid_format', 's1 with a lone low surrogate (\\udc00 in the JSON text)'),
  bad('s1', 4242, 'wrong_type', 's1 a number'),
  bad('s1', ['array-item-value'], 'wrong_type', 's1 an array'),
  bad('s1', { ['__proto__']: { polluted: 'nested-proto' } }, 'wrong_type', 's1 an object with a __proto__ member'),
  bad('test', 'yes', 'wrong_type', 'test "yes"'),
  bad('test', 'True', 'wrong_type', 'test "True"'),
  bad('test', 1, 'wrong_type', 'test 1'),
  bad('test', [true], 'wrong_type', 'test [true]'),
  bad('unknown_extra', 'unknown-field-value', 'unknown_field', 'an unknown field, named in errors'),
  bad('FIRST_NAME', 'Upper-Case-Key', 'unknown_field', 'a field name in the wrong case'),
  {
    title: '__proto__ as an unknown field (raw JSON member)',
    body: () => withRawMembers(uniqueLead(), '"__proto__":{"polluted":"proto-value","toString":"proto-tostring"}'),
    errors: [{ field: '__proto__', code: 'unknown_field' }],
    values: ['proto-value', 'proto-tostring'],
  },
  {
    title: 'constructor as an unknown field (raw JSON member)',
    body: () => withRawMembers(uniqueLead(), '"constructor":{"prototype":{"polluted":"ctor-value"}}'),
    errors: [{ field: 'constructor', code: 'unknown_field' }],
    values: ['ctor-value'],
  },
  {
    title: 'prototype as an unknown field (raw JSON member)',
    body: () => withRawMembers(uniqueLead(), '"prototype":{"polluted":"prototype-value"}'),
    errors: [{ field: 'prototype', code: 'unknown_field' }],
    values: ['prototype-value'],
  },
  {
    title: 'more than 20 unknown fields: 20 named, the rest counted',
    body: () => uniqueLead(Object.fromEntries(Array.from({ length: 25 }, (_, i) => [`extra_${i + 10}`, `extra-value-${i + 10}`]))),
    errors: [
      ...Array.from({ length: 20 }, (_, i) => ({ field: `extra_${i + 10}`, code: 'unknown_field' })),
      { field: '*', code: 'unknown_field' },
    ],
    values: Array.from({ length: 25 }, (_, i) => `extra-value-${i + 10}`),
  },
  // JSON.parse keeps the last of two members of one name; a proxy or the supplier's own code may
  // have read the first. Either value is refused, once per field, whichever rule it would break.
  {
    title: 'a field given twice, both values good (raw JSON members): repeated',
    body: () => withRawMembers(uniqueLead(), ' "zip" \n : "10001"'),
    errors: [{ field: 'zip', code: 'repeated' }],
    values: ['10001'],
  },
  {
    title: 'a field given twice, the last value bad: repeated, once for the field',
    body: () => withRawMembers(uniqueLead(), '"email":"second-value-not-an-address"'),
    errors: [{ field: 'email', code: 'repeated' }],
    values: ['second-value-not-an-address'],
  },
  {
    title: 'the consent alias given twice, and two fields given twice: each named',
    body: () => withRawMembers(uniqueLead({ s1: 'first-s1' }), `"xxTrustedFormCertUrl":"${CERT_URL}"`, `"xxTrustedFormCertUrl":"${CERT_URL}"`, '"sid":"src-2"', '"s1":"second-s1"'),
    errors: [
      { field: 'xxTrustedFormCertUrl', code: 'repeated' },
      { field: 'sid', code: 'repeated' },
      { field: 's1', code: 'repeated' },
    ],
    values: ['first-s1', 'second-s1'],
  },
  {
    title: 'an unknown member given twice: unknown, once; names repeated inside a value are its own',
    body: () => withRawMembers(uniqueLead(), '"extra_member":"value-one"', '"extra_member":"value-two"', '"test":{"a":1,"a":2}'),
    errors: [
      { field: 'extra_member', code: 'unknown_field' },
      { field: 'test', code: 'wrong_type' },
    ],
    values: ['value-one', 'value-two'],
  },
  {
    title: 'an empty object: every required field',
    body: () => ({}),
    errors: REQUIRED.map((field) => ({ field, code: 'required' })),
    values: [],
  },
];

// Every field bad at once: each is listed, once.
const MANY_BAD: Fields = {
  first_name: 'Zelda42',
  last_name: '',
  email: 'not-an-address',
  mobile: '12345',
  zip: 'ABCDE',
  accident_state: 'Narnia',
  certificate_url: 'http://cert.trustedform.com/nope',
  sid: 'bad sid!',
  s1: S1_256,
  test: 'yes',
  extra_field: 'extra-field-value',
};
const MANY_BAD_ERRORS = [
  { field: 'first_name', code: 'invalid_format' },
  { field: 'last_name', code: 'too_short' },
  { field: 'email', code: 'invalid_format' },
  { field: 'mobile', code: 'invalid_format' },
  { field: 'zip', code: 'invalid_format' },
  { field: 'accident_state', code: 'unknown_state' },
  { field: 'certificate_url', code: 'invalid_format' },
  { field: 'sid', code: 'invalid_format' },
  { field: 's1', code: 'too_long' },
  { field: 'test', code: 'wrong_type' },
  { field: 'extra_field', code: 'unknown_field' },
];

const byField = (a: { field: string; code: string }, b: { field: string; code: string }) =>
  a.field === b.field ? a.code.localeCompare(b.code) : a.field < b.field ? -1 : 1;

/** Every form of a submitted value that would show it was echoed (short ASCII ones say nothing). */
function echoForms(value: unknown): string[] {
  if (typeof value === 'string') {
    const forms = [value, value.trim(), JSON.stringify(value).slice(1, -1)].map((f) => f.toLowerCase());
    return [...new Set(forms)].filter((f) => f.trim().length >= 3 || /[^\x00-\x7f]/.test(f));
  }
  if (typeof value === 'number') return [String(value)];
  if (Array.isArray(value)) return [JSON.stringify(value).toLowerCase(), ...value.flatMap(echoForms)];
  if (typeof value === 'object' && value !== null) {
    return [JSON.stringify(value).toLowerCase(), ...Object.values(value).flatMap(echoForms)];
  }
  return [];
}

function expectNotEchoed(body: Record<string, unknown>, values: readonly unknown[]): void {
  // The trace id and lead id are random or counted: leaving them out keeps the check deterministic.
  const { trace_id: _trace, lead_id: _lead, ...rest } = body;
  const haystack = JSON.stringify(rest).toLowerCase();
  const messages = [rest.message, ...((rest.errors as FieldError[] | undefined) ?? []).map((e) => e.message)].join('\n').toLowerCase();
  expect(messages.length, 'the response has messages').to.be.greaterThan(0);
  for (const value of values) {
    for (const form of echoForms(value)) {
      expect(messages, `a message echoes the submitted value ${JSON.stringify(form)}`).not.to.include(form);
      expect(haystack, `the response echoes the submitted value ${JSON.stringify(form)}`).not.to.include(form);
    }
  }
}

describe('post-lead: every field rule through the real HTTPS server', function () {
  this.timeout(60_000);
  let svc: TestService;
  let key: string;

  before(async () => {
    svc = await TestService.start();
    key = await svc.key();
  });
  after(async () => {
    await svc?.stop();
  });

  const post = (body: Fields | string) => svc.post(body, { 'x-api-key': key });

  describe('good values: 201 and the exact normal form in LeadReceived', () => {
    for (const good of GOOD) {
      it(good.title, async () => {
        const lead = uniqueLead(good.set);
        for (const field of good.unset ?? []) delete lead[field];
        const reply = await post(lead);
        expect(reply.status, reply.text).to.equal(201);
        expect(envelopeProblems(reply)).to.deep.equal([]);
        expect(reply.body.code).to.be.oneOf(['SOLD', 'UNSOLD']);
        expect(reply.body.errors).to.equal(undefined);
        if (good.envelopeTest) expect(reply.body.test).to.equal(true);
        else expect(reply.body).not.to.have.property('test');

        const events = await leadEvents(svc, reply.body.lead_id as number);
        const received = events.find((e) => e.type === 'LeadReceived');
        expect(received, 'LeadReceived recorded').to.not.equal(undefined);
        const stored = (received!.data as { lead: NormalisedLead }).lead;
        const base = uniqueLeadBase(lead);
        expect(stored).to.deep.equal({ ...base, ...good.expect });
      });
    }
  });

  describe('bad values: 422 INVALID naming exactly the failing fields, never echoing the value', () => {
    for (const b of BAD) {
      it(b.title, async () => {
        await expectInvalid(await post(b.body()), b.errors, b.values);
      });
    }

    it('one request with every field bad lists every failing field, once', async () => {
      await expectInvalid(await post(MANY_BAD), MANY_BAD_ERRORS, Object.values(MANY_BAD));
    });

    it('more than 20 unknown fields, some named with other characters: one `*` says both, never a name of those', async () => {
      const extra = Object.fromEntries([
        ...Array.from({ length: 3 }, (_, i) => [`ada${i}@example.com`, 1]),
        ...Array.from({ length: 22 }, (_, i) => [`extra_${i + 10}`, 1]),
      ]);
      const reply = await post(uniqueLead(extra));
      expect(reply.status, reply.text).to.equal(422);
      const unnamed = (reply.body.errors as Array<{ field: string; message: string }>).filter((e) => e.field === '*');
      expect(unnamed).to.have.length(1);
      expect(unnamed[0]!.message).to.match(/its name is not repeated\); and 5 more fields that are not lead fields$/);
      expect(reply.text).to.not.include('@example.com');
    });

    it('a mobile of another region is told the rule and the regions allowed, not the number', async () => {
      const reply = await post(uniqueLead({ mobile: '+447911123456' }));
      expect(reply.status, reply.text).to.equal(422);
      expect(reply.body.errors).to.deep.equal([
        { field: 'mobile', code: 'region_not_allowed', message: 'mobile must be a number of one of these regions: US, CA, PR, VI, GU, AS, MP' },
      ]);
    });

    it('prototype-pollution members leave Object.prototype untouched', async () => {
      const polluted = ['polluted', 'isAdmin'];
      await post(withRawMembers(uniqueLead(), '"__proto__":{"polluted":"yes","isAdmin":true}', '"constructor":{"prototype":{"polluted":"yes"}}'));
      for (const name of polluted) {
        expect(({} as Record<string, unknown>)[name], name).to.equal(undefined);
        expect(Object.hasOwn(Object.prototype, name), name).to.equal(false);
      }
    });
  });

  // These fail against the current src: each is a defect reported with the tests (see the report).
  describe('src defects: fail until src is fixed', () => {
    // PRE_NORMALISE in src/leads/validate.ts is an ordinary object and is consulted with `key in`, so
    // a member name inherited from Object.prototype with a string value is called as a normaliser.
    for (const name of ['__proto__', '__defineGetter__', '__defineSetter__']) {
      it(`DEFECT: an unknown field ${name} with a string value is 422 unknown_field (today: 500 INTERNAL_ERROR)`, async () => {
        const reply = await post(withRawMembers(uniqueLead(), `"${name}":"inherited-name-value"`));
        await expectInvalid(reply, [{ field: name, code: 'unknown_field' }], ['inherited-name-value']);
      });
    }
    // libphonenumber-js's parsePhoneNumberFromString extracts a number from surrounding text, so a
    // mobile of letters or words around a valid number is accepted as that number.
    for (const mobile of ['abc2135550188xyz', 'call 213-555-0189 now']) {
      it(`DEFECT: mobile ${JSON.stringify(mobile)} (text around a number) is 422 invalid_format (today: 201)`, async () => {
        await expectInvalid(await post(uniqueLead({ mobile })), [{ field: 'mobile', code: 'invalid_format' }], [mobile]);
      });
    }
  });

  /** The normal form of a unique lead as built by uniqueLead, before the case's own changes. */
  function uniqueLeadBase(lead: Fields): NormalisedLead {
    const mobile = String(lead.mobile);
    return {
      first_name: 'Ada',
      last_name: 'Lovelace',
      email: String(lead.email),
      mobile,
      mobile_national: mobile.slice(2),
      zip: '90210',
      zip4: null,
      accident_state: 'CA',
      certificate_url: CERT_URL,
      certificate_id: CERT_ID,
      sid: 'src-1',
      s1: 'click-1',
      test: false,
    };
  }

  async function expectInvalid(
    reply: Awaited<ReturnType<typeof post>>,
    errors: ReadonlyArray<{ field: string; code: string }>,
    values: readonly unknown[],
  ): Promise<void> {
    expect(reply.status, reply.text).to.equal(422);
    expect(envelopeProblems(reply)).to.deep.equal([]);
    expect(reply.body).to.include({ ok: false, code: 'INVALID', acceptance: 'rejected', lead_status: 'rejected', Response: 'Failure', sold: false });
    expect(reply.body.lead_id).to.be.a('number');
    const got = (reply.body.errors as FieldError[]).map(({ field, code }) => ({ field, code }));
    expect([...got].sort(byField), reply.text).to.deep.equal([...errors].sort(byField));
    expectNotEchoed(reply.body, values);

    const events = await leadEvents(svc, reply.body.lead_id as number);
    expect(events.map((e) => e.type)).to.deep.equal(['LeadReceived', 'LeadRejected']);
    expect((events[0]!.data as { lead: unknown }).lead, 'no lead data kept for an invalid lead').to.equal(null);
    expect(events[1]!.data).to.deep.include({ code: 'INVALID', errors: reply.body.errors });
  }
});

describe('post-lead: PHONE_REGIONS chooses the regions a mobile may be of', function () {
  this.timeout(60_000);
  let svc: TestService;
  let key: string;

  before(async () => {
    svc = await TestService.start({ env: { PHONE_REGIONS: 'GB' } });
    key = await svc.key();
  });
  after(async () => {
    await svc?.stop();
  });

  const post = (body: Fields) => svc.post(body, { 'x-api-key': key });
  const onlyGb = { field: 'mobile', code: 'region_not_allowed', message: 'mobile must be a number of one of these regions: GB' };

  it('PHONE_REGIONS=GB: a UK mobile passes, stored E.164 and national', async () => {
    const reply = await post(uniqueLead({ mobile: '+44 7400 123456' }));
    expect(reply.status, reply.text).to.equal(201);
    const events = await leadEvents(svc, reply.body.lead_id as number);
    const lead = (events.find((e) => e.type === 'LeadReceived')!.data as { lead: NormalisedLead }).lead;
    expect(lead).to.include({ mobile: '+447400123456', mobile_national: '7400123456' });
  });

  it('PHONE_REGIONS=GB: a US mobile, and a bare 10-digit number (taken as +1), are INVALID on mobile', async () => {
    for (const mobile of ['+12135550143', '2135550144']) {
      const reply = await post(uniqueLead({ mobile }));
      expect(reply.status, mobile).to.equal(422);
      expect(reply.body).to.include({ code: 'INVALID' });
      expect(reply.body.errors, mobile).to.deep.equal([onlyGb]);
    }
  });

  it('PHONE_REGIONS=GB: +447911123456 is a Guernsey (GG) number to libphonenumber, so not of GB', async () => {
    const reply = await post(uniqueLead({ mobile: '+447911123456' }));
    expect(reply.status).to.equal(422);
    expect(reply.body.errors).to.deep.equal([onlyGb]);
  });
});
