import type { FromSchema } from 'json-schema-to-ts';
import { US_STATE_CODES } from './us-states.js';

// The lead as posted, after the trimming and case folding of normalise.ts: one schema gives the
// TypeScript type, the ajv validator and (later) the OpenAPI document, so each field rule is
// written once. Formats named here are registered in validate.ts.
const NAME = {
  type: 'string',
  minLength: 1,
  maxLength: 50,
  // Letters of any script (with their combining marks), apostrophe, dot, hyphen; single spaces
  // between words; at least one letter, so that the "." or "-" a form puts for a name it lacks is refused.
  pattern: "^(?=[^\\p{L}]*\\p{L})[\\p{L}\\p{M}'.\\-]+(?: [\\p{L}\\p{M}'.\\-]+)*$",
} as const;

export const LEAD_SCHEMA = {
  $id: 'Lead',
  type: 'object',
  additionalProperties: false,
  required: ['first_name', 'last_name', 'email', 'mobile', 'zip', 'accident_state', 'certificate_url', 'sid'],
  properties: {
    first_name: { ...NAME, description: "Trimmed, inner spaces collapsed, a typographic apostrophe (’) kept as '; letters of any script, space, ' . -, with at least one letter" },
    last_name: { ...NAME, description: "Trimmed, inner spaces collapsed, a typographic apostrophe (’) kept as '; letters of any script, space, ' . -, with at least one letter" },
    email: { type: 'string', maxLength: 254, format: 'lead-email', description: 'Trimmed and lower-cased.' },
    mobile: {
      type: 'string',
      maxLength: 32,
      format: 'dialable-phone',
      description:
        'International format (+12025550143); a bare 10-digit number is taken as +1. Must be a valid, dialable number of an allowed region ' +
        '(PHONE_REGIONS; by default the US, Canada and the US territories: US, CA, PR, VI, GU, AS, MP); a number of another region is ' +
        'INVALID with code region_not_allowed; one with an extension (ext. 12) is invalid_format. Stored as E.164 and national.',
    },
    zip: { type: 'string', pattern: '^[0-9]{5}(?:-[0-9]{4})?$', description: 'US ZIP: 12345 or 12345-6789.' },
    accident_state: { type: 'string', enum: US_STATE_CODES, description: 'USPS code in any case, or the full name, of a state, DC or an inhabited territory (PR, VI, GU, AS, MP).' },
    certificate_url: {
      type: 'string',
      maxLength: 2048,
      format: 'consent-certificate-url',
      description: 'https URL of a consent certificate on an allowed host, ending in a 40-hex certificate id; printable ASCII only (percent-encode anything else). Alias: xxTrustedFormCertUrl.',
    },
    sid: { type: 'string', pattern: '^[A-Za-z0-9._-]{1,64}$', description: 'Supplier source id.' },
    // No lone surrogate (`\ud800` escaped in the JSON text): it is no character, UTF-8 cannot hold
    // it, and each store turns it into something else, so the s1 read back (and a report's cursor
    // over it) would not be the one posted.
    s1: {
      type: ['string', 'null'],
      maxLength: 255,
      pattern: '^[^\\uD800-\\uDFFF]*$',
      description: 'Supplier sub-id (click id), optional: up to 255 characters; an escaped lone surrogate (\\ud800) is no character and is refused.',
    },
    test: { type: ['boolean', 'null'], description: 'A test lead runs the whole pipeline but is never delivered, uses no cap and is reported apart.' },
    ping_id: {
      type: ['string', 'null'],
      pattern: '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$',
      description:
        'The ping_id a ping answered with: the lead is sold to that ping\'s winning bid (zip, accident_state, sid and test must be the ping\'s). ' +
        'Trimmed and lower-cased first (a UUID in capitals is the same id); null: no ping, as when it is left out.',
    },
  },
} as const;

export type PostedLead = FromSchema<typeof LEAD_SCHEMA>;

export const CERTIFICATE_URL_ALIAS = 'xxTrustedFormCertUrl';

/**
 * A ping: the lead's qualifying fields and nothing that identifies the consumer. The field rules
 * are the lead's own, so a ping that passes is a lead that would pass on these fields.
 */
export const PING_SCHEMA = {
  $id: 'Ping',
  type: 'object',
  additionalProperties: false,
  required: ['zip', 'accident_state', 'sid'],
  properties: {
    zip: LEAD_SCHEMA.properties.zip,
    accident_state: LEAD_SCHEMA.properties.accident_state,
    sid: LEAD_SCHEMA.properties.sid,
    s1: LEAD_SCHEMA.properties.s1,
    test: { type: ['boolean', 'null'], description: 'A test ping asks the buyers as a real one would; its post must be a test lead too.' },
  },
} as const;

export type PostedPing = FromSchema<typeof PING_SCHEMA>;
