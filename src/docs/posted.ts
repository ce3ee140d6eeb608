import { US_STATE_CODES, US_STATE_NAMES } from '../leads/us-states.js';
import { POSTED_AS, type PostedForm } from '../leads/validate.js';

// The lead's and the ping's field rules in the form a client posts them. The validator judges a
// field once the service has trimmed it, folded its case or taken a state's name for its code
// (POSTED_AS): published as they are, its rules would refuse bodies the service takes (" 90210",
// "california", a ping_id in capitals), and a client or gateway that checks its requests against
// the document would refuse good leads. What each field becomes is said in its description.

type Json = Record<string, unknown>;

/** A pattern with blanks allowed around what it matches. */
const padded = (pattern: string): string => `^\\s*(?:${pattern.replace(/^\^/, '').replace(/\$$/, '')})\\s*$`;

/** A letter in either case, as a character class; anything else escaped as it is. */
const anyCase = (text: string): string =>
  [...text].map((c) => (/[a-z]/i.test(c) ? `[${c.toLowerCase()}${c.toUpperCase()}]` : c === ' ' ? '\\s+' : c.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('');

/** A state as posted: its USPS code or one of its names, in any case, blanks around it and runs of them inside. */
const STATE_PATTERN = `^\\s*(?:${[...US_STATE_CODES, ...US_STATE_NAMES].map(anyCase).join('|')})\\s*$`;

function posted(property: Json, form: PostedForm): Json {
  const pattern = typeof property.pattern === 'string' ? property.pattern : undefined;
  switch (form) {
    case 'state': {
      const stated: Json = { ...property, pattern: STATE_PATTERN };
      delete stated.enum;
      return stated;
    }
    case 'collapsed':
      // Runs of blanks are one space, and a typographic apostrophe the ASCII one (validate.ts).
      return pattern ? { ...property, pattern: padded(pattern.replaceAll(' ', '\\s+').replaceAll("'", "'\u2018\u2019\u02BC")) } : property;
    case 'lower-cased':
      return pattern ? { ...property, pattern: padded(pattern.replaceAll('a-f', 'a-fA-F')) } : property;
    case 'trimmed':
      return pattern ? { ...property, pattern: padded(pattern) } : property;
  }
}

/** The schema (in its OpenAPI form) with each normalised field's rule as a client posts it. */
export function asPosted(schema: Json): Json {
  const properties = schema.properties as Record<string, Json>;
  const forms = POSTED_AS as Readonly<Record<string, PostedForm>>;
  return { ...schema, properties: Object.fromEntries(Object.entries(properties).map(([name, property]) => [name, forms[name] ? posted(property, forms[name]) : property])) };
}
