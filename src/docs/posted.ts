import { US_STATE_CODES, US_STATE_NAMES } from '../leads/us-states.js';
import { POSTED_AS, type PostedForm } from '../leads/validate.js';

// The lead's and the ping's field rules in the form a client posts them. The validator judges a
// field once the service has trimmed it, folded its case or taken a state's name for its code
// (POSTED_AS): published as they are, its rules would refuse bodies the service takes (" 90210",
// "california", a ping_id in capitals), and a client or gateway that checks its requests against
// the document would refuse good leads. So every keyword published here holds for the value as
// posted: a pattern with blanks allowed around it, a length counted inside those blanks, and a
// format (which no validator reads around blanks) left to the description. What each field becomes
// is said in its description.

type Json = Record<string, unknown>;

/** A pattern with blanks allowed around what it matches. */
const padded = (pattern: string): string => `^\\s*(?:${pattern.replace(/^\^/, '').replace(/\$$/, '')})\\s*$`;

/**
 * `min` to `max` characters once the blanks around are trimmed, as a pattern for the value with
 * them: the first and last kept characters are not blanks, and `trim()` takes exactly what `\s`
 * matches. `except`: a character class body no character may be in. No lookahead (validators built
 * on RE2 have none). The blanks after the value are inside the optional group, never a second
 * `\s*` next to the first: an all-blank run then a stray character would otherwise be scanned once
 * per blank before it (seconds for a 64 KiB body).
 */
function trimmedLength(min: number, max: number, except = ''): string {
  if (min > 1 || max < 2) throw new Error(`no pattern for a trimmed length of ${min}–${max}`);
  const any = except ? `[^${except}]` : '[\\s\\S]';
  const edge = `[^\\s${except}]`;
  const kept = `${edge}(?:${any}{0,${max - 2}}${edge})?\\s*`;
  return `^\\s*${min === 0 ? `(?:${kept})?` : kept}$`;
}

/**
 * An e-mail address as the service takes it, with blanks around: one @, no blank inside, a local
 * part of at most 64 characters. Its whole length (254) and which characters each part may have
 * cannot be said together without lookahead, so they are left to the description.
 */
const POSTED_EMAIL_PATTERN = '^\\s*[^\\s@]{1,64}@[^\\s@]{1,252}\\s*$';
const EMAIL_RULE = 'Then at most 254 characters, at most 64 before the @: a dot-atom local part and a domain of letters, digits and hyphens with an alphabetic top-level label.';

/** A consumer's e-mail in an erasure or a look-up: checked as a posted lead's, and an empty one is left out. */
export const CONSUMER_EMAIL = {
  type: 'string',
  pattern: `^$|${POSTED_EMAIL_PATTERN}`,
  description: `Trimmed and lower-cased as a posted lead's. ${EMAIL_RULE} Empty: left out.`,
} as const;

/** A letter in either case, as a character class; anything else escaped as it is. */
const anyCase = (text: string): string =>
  [...text].map((c) => (/[a-z]/i.test(c) ? `[${c.toLowerCase()}${c.toUpperCase()}]` : c === ' ' ? '\\s+' : c.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('');

/** A state as posted: its USPS code or one of its names, in any case, blanks around it and runs of them inside. */
const STATE_PATTERN = `^\\s*(?:${[...US_STATE_CODES, ...US_STATE_NAMES].map(anyCase).join('|')})\\s*$`;

/** The class body of a pattern that only says which characters may occur (`^[^\uD800-\uDFFF]*$`), negated. */
function excludedBy(pattern: string): string {
  const only = /^\^\[\^([^\]]+)\]\*\$$/.exec(pattern);
  if (!only) throw new Error(`cannot count a trimmed length under the pattern ${pattern}`);
  return only[1]!;
}

const described = (property: Json, rule: string): string => [property.description, rule].filter(Boolean).join(' ');

/**
 * A trimmed field around its blanks. Its length goes into the pattern; so does the pattern's own
 * rule when it only says which characters may occur (s1). A pattern that says more and a length
 * together would take lookahead: none has both yet, and the build stops rather than publish a rule
 * that is not the service's. A format is dropped (a validator reads none around blanks): the
 * description says what the service checks.
 */
function trimmed(property: Json, pattern: string | undefined): Json {
  const { maxLength, minLength, format, ...rest } = property;
  if (format === 'email') return { ...rest, pattern: POSTED_EMAIL_PATTERN, description: described(property, EMAIL_RULE) };
  // A minimum length holds as posted: blanks only add to it.
  if (typeof maxLength !== 'number') return { ...rest, ...(minLength === undefined ? {} : { minLength }), ...(pattern ? { pattern: padded(pattern) } : {}) };
  return {
    ...rest,
    pattern: trimmedLength(typeof minLength === 'number' ? minLength : 0, maxLength, pattern ? excludedBy(pattern) : ''),
    description: described(property, `At most ${maxLength} characters once trimmed.`),
  };
}

/**
 * A name around its blanks: runs of blanks are one space, a typographic apostrophe the ASCII one
 * (validate.ts). The name is also NFC-normalised before it is measured, which can shorten it (a
 * letter typed with a separate accent, Hangul typed as jamo), so no count of the posted characters
 * is the service's: the length is only said. At least one letter holds as posted (minLength).
 */
function collapsed(property: Json, pattern: string | undefined): Json {
  const { maxLength, ...rest } = property;
  return {
    ...rest,
    ...(pattern ? { pattern: padded(pattern.replaceAll(' ', '\\s+').replaceAll("'", "'\u2018\u2019\u02BC")) } : {}),
    ...(typeof maxLength === 'number' ? { description: described(property, `At most ${maxLength} characters once trimmed and collapsed.`) } : {}),
  };
}

function posted(property: Json, form: PostedForm): Json {
  const pattern = typeof property.pattern === 'string' ? property.pattern : undefined;
  switch (form) {
    case 'state': {
      const stated: Json = { ...property, pattern: STATE_PATTERN };
      delete stated.enum;
      return stated;
    }
    case 'collapsed':
      return collapsed(property, pattern);
    case 'lower-cased':
      return trimmed(property, pattern?.replaceAll('a-f', 'a-fA-F'));
    case 'trimmed':
      return trimmed(property, pattern);
  }
}

/** The schema (in its OpenAPI form) with each normalised field's rule as a client posts it. */
export function asPosted(schema: Json): Json {
  const properties = schema.properties as Record<string, Json>;
  const forms = POSTED_AS as Readonly<Record<string, PostedForm>>;
  return { ...schema, properties: Object.fromEntries(Object.entries(properties).map(([name, property]) => [name, forms[name] ? posted(property, forms[name]) : property])) };
}
