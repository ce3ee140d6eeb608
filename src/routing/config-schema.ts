// The routing file as an operator writes it. The interfaces describe the file
// before defaults; `satisfies JSONSchemaType<RoutingFile>` makes the compiler prove that the
// schema and the interfaces agree, so neither can drift from the other.
import { Ajv, type JSONSchemaType } from 'ajv';
import { US_STATE_CODES } from '../leads/us-states.js';
import { MAX_PING_DEADLINE_MS } from '../limits.js';

const STRATEGIES = ['highest_price', 'priority', 'round_robin'] as const;
export type Strategy = (typeof STRATEGIES)[number];

const CAP_PERIODS = ['hour', 'day', 'week', 'month'] as const;
export type CapPeriod = (typeof CAP_PERIODS)[number];

export const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
export type Weekday = (typeof WEEKDAYS)[number];

/** `not_fail` also takes a lead whose check came back `unknown` (provider down, DNS timeout). */
const REQUIREMENTS = ['pass', 'not_fail'] as const;
export type Requirement = (typeof REQUIREMENTS)[number];

export const DEFAULTS = {
  currency: 'USD',
  strategy: 'highest_price',
  duplicate_window_days: 30,
  priority: 100,
  active: true,
  cap_tz: 'UTC',
  days: WEEKDAYS,
  timeout_ms: 5000,
  /** A bid is worth asking for only while the supplier waits: well under a second. */
  ping_timeout_ms: 500,
  /**
   * The highest webhook bid taken from a buyer that sets no `max_bid`, in the file's currency: far
   * above what an accident lead sells for, so it only stops a bidder's mistake (a bid of 1e20, a
   * price in cents) from selling a lead at it and swamping every report.
   */
  max_bid: 10_000,
  max_attempts: 8,
  return_window_days: 7,
  return_reasons: ['bad_phone', 'not_interested', 'duplicate', 'fraud'],
  bucket: { id: 'unsold', default: true },
} as const;

/**
 * The longest a delivery attempt waits for the buyer's answer. An endpoint silent for a minute is
 * down, not slow, and each waiting attempt holds one of the buyer's delivery slots all that time.
 * It also keeps the value far under what Node's timers take: over 2^31-1 ms a timer fires at once,
 * so a typo's extra zeros would fail every delivery as a timeout within milliseconds.
 */
const MAX_DELIVERY_TIMEOUT_MS = 60_000;

/**
 * The longest a webhook bidder is waited for: the highest PING_DEADLINE_MS. The round closes before
 * its deadline whatever the bidder's own timeout, so a longer one could never be reached; and
 * AbortSignal.timeout, which times a bid, throws over 2^32-1 ms.
 */
const MAX_PING_TIMEOUT_MS = MAX_PING_DEADLINE_MS;

interface CapEntry {
  readonly period: CapPeriod;
  readonly max: number;
  readonly tz?: string;
}

export interface HoursEntry {
  readonly tz: string;
  readonly days?: readonly Weekday[];
  readonly start: string;
  readonly end: string;
}

interface PullDeliveryEntry {
  readonly kind: 'pull';
}

interface WebhookDeliveryEntry {
  readonly kind: 'webhook';
  readonly url: string;
  readonly timeout_ms?: number;
  readonly max_attempts?: number;
  readonly secret_env?: string;
}

export type DeliveryEntry = PullDeliveryEntry | WebhookDeliveryEntry;

/** How a buyer bids on pings: its price (static), or what its endpoint answers (webhook). */
export type PingEntry =
  | { readonly kind: 'static' }
  | { readonly kind: 'webhook'; readonly url: string; readonly timeout_ms?: number; readonly secret_env?: string; readonly max_bid?: number };

interface RequireEntry {
  readonly phone?: Requirement;
  readonly email?: Requirement;
  readonly consent?: Requirement;
}

export interface BuyerEntry {
  readonly id: string;
  readonly name?: string;
  readonly price: number;
  readonly priority?: number;
  readonly active?: boolean;
  readonly states?: readonly string[];
  readonly zip_prefixes?: readonly string[];
  readonly require?: RequireEntry;
  readonly caps?: readonly CapEntry[];
  readonly hours?: HoursEntry;
  readonly delivery?: DeliveryEntry;
  readonly ping?: PingEntry;
  readonly return_window_days?: number;
  readonly return_reasons?: readonly string[];
}

export interface BucketEntry {
  readonly id: string;
  readonly default?: boolean;
  readonly states?: readonly string[];
  readonly zip_prefixes?: readonly string[];
}

export interface RoutingFile {
  readonly currency?: string;
  readonly strategy?: Strategy;
  readonly duplicate_window_days?: number;
  /** Ping bids under this are ignored. */
  readonly min_bid?: number;
  readonly buyers: readonly BuyerEntry[];
  readonly buckets?: readonly BucketEntry[];
}

// `hint` is an annotation read back when reporting: it turns ajv's `must match pattern "^…$"`
// into something an operator can act on. `{value}` is replaced with the offending value where it is
// a short code (a state, a period, a zone; see `shown` in config-checks.ts), else with its kind and
// length; `{what}` always with its kind and length, for a field whose value is never echoed: an id
// (a leads export pasted in holds consumers' ones), a URL (it may carry a token), secret_env (a
// secret pasted in its place) or free text. Refusals are logged, and a log holds no personal data.
// `chars`, the characters a field takes, lets `{what}` name the kind of the first other one and
// where it is (`an upper-case letter at character 1`), which says what to fix without the value.
const ID = { type: 'string', pattern: '^[a-z0-9][a-z0-9._-]{0,63}$', chars: '[a-z0-9._-]', hint: 'must be 1-64 of a-z 0-9 . _ - starting with a letter or digit, got {what}' } as const;
const TIME_ZONE = { type: 'string', format: 'time-zone', hint: 'unknown time zone {value}' } as const;
const START = { type: 'string', pattern: '^([01][0-9]|2[0-3]):[0-5][0-9]$', hint: 'must be HH:MM (00:00-23:59), got {value}' } as const;
// 24:00 lets a window run to midnight without wrapping into an overnight window.
const END = { type: 'string', pattern: '^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$', hint: 'must be HH:MM (00:00-24:00), got {value}' } as const;
const INTEGER_0 = { type: 'integer', minimum: 0 } as const;
const INTEGER_1 = { type: 'integer', minimum: 1 } as const;
/** An amount of the file's currency: not negative, in whole cents. */
const AMOUNT = { type: 'number', nullable: true, minimum: 0, multipleOf: 0.01, hint: 'must have at most 2 decimal places, got {value}' } as const;

const STATES = {
  type: 'array', nullable: true, minItems: 1, uniqueItems: true,
  items: { type: 'string', enum: US_STATE_CODES, hint: 'must be an upper-case USPS state code (incl. DC, PR), got {value}' },
} as const;

const ZIP_PREFIXES = {
  type: 'array', nullable: true, minItems: 1, uniqueItems: true,
  items: { type: 'string', pattern: '^[0-9]{1,5}$', hint: 'must be 1-5 digits, got {value}' },
} as const;

const REQUIREMENT = {
  type: 'string', nullable: true, enum: REQUIREMENTS, hint: "must be 'pass' or 'not_fail', got {value}",
} as const;

const DELIVERY = {
  type: 'object', nullable: true, discriminator: { propertyName: 'kind' },
  default: { kind: 'pull' },
  oneOf: [
    { type: 'object', properties: { kind: { type: 'string', const: 'pull' } }, required: ['kind'], additionalProperties: false },
    {
      type: 'object',
      properties: {
        kind: { type: 'string', const: 'webhook' },
        url: { type: 'string', format: 'https-url', hint: 'must be an absolute https:// URL, got {what}' },
        timeout_ms: { ...INTEGER_1, nullable: true, maximum: MAX_DELIVERY_TIMEOUT_MS, default: DEFAULTS.timeout_ms, hint: `must be at most ${MAX_DELIVERY_TIMEOUT_MS} (a minute), got {value}` },
        max_attempts: { ...INTEGER_1, nullable: true, default: DEFAULTS.max_attempts },
        secret_env: { type: 'string', nullable: true, pattern: '^[A-Z_][A-Z0-9_]*$', hint: 'must name an environment variable (A-Z 0-9 _) that holds the secret, not the secret itself; got {what}' },
      },
      required: ['kind', 'url'],
      additionalProperties: false,
    },
  ],
} as const;

const PING = {
  type: 'object', nullable: true, discriminator: { propertyName: 'kind' },
  oneOf: [
    { type: 'object', properties: { kind: { type: 'string', const: 'static' } }, required: ['kind'], additionalProperties: false },
    {
      type: 'object',
      properties: {
        kind: { type: 'string', const: 'webhook' },
        url: DELIVERY.oneOf[1].properties.url,
        timeout_ms: { ...INTEGER_1, nullable: true, maximum: MAX_PING_TIMEOUT_MS, default: DEFAULTS.ping_timeout_ms, hint: `must be at most ${MAX_PING_TIMEOUT_MS} (the highest PING_DEADLINE_MS: the round of bids closes by then), got {value}` },
        secret_env: DELIVERY.oneOf[1].properties.secret_env,
        // A static bidder has none: it bids its price, which the operator wrote in this file.
        max_bid: AMOUNT,
      },
      required: ['kind', 'url'],
      additionalProperties: false,
    },
  ],
} as const;

const BUYER = {
  type: 'object',
  properties: {
    id: ID,
    name: { type: 'string', nullable: true, minLength: 1, maxLength: 200 },
    price: { type: 'number', minimum: 0, multipleOf: 0.01, hint: 'must have at most 2 decimal places, got {value}' },
    priority: { type: 'integer', nullable: true, minimum: 0, default: DEFAULTS.priority },
    active: { type: 'boolean', nullable: true, default: DEFAULTS.active },
    states: STATES,
    zip_prefixes: ZIP_PREFIXES,
    require: {
      type: 'object', nullable: true,
      properties: { phone: REQUIREMENT, email: REQUIREMENT, consent: REQUIREMENT },
      additionalProperties: false,
    },
    caps: {
      type: 'array', nullable: true,
      items: {
        type: 'object',
        properties: {
          period: { type: 'string', enum: CAP_PERIODS, hint: 'must be hour, day, week or month, got {value}' },
          max: INTEGER_0,
          tz: { ...TIME_ZONE, nullable: true, default: DEFAULTS.cap_tz },
        },
        required: ['period', 'max'],
        additionalProperties: false,
      },
    },
    hours: {
      type: 'object', nullable: true,
      properties: {
        tz: TIME_ZONE,
        days: {
          type: 'array', nullable: true, minItems: 1, uniqueItems: true, default: DEFAULTS.days,
          items: { type: 'string', enum: WEEKDAYS, hint: 'must be one of mon, tue, wed, thu, fri, sat, sun, got {value}' },
        },
        start: START,
        end: END,
      },
      required: ['tz', 'start', 'end'],
      additionalProperties: false,
    },
    delivery: DELIVERY,
    ping: PING,
    return_window_days: { ...INTEGER_0, nullable: true, default: DEFAULTS.return_window_days },
    return_reasons: {
      type: 'array', nullable: true, uniqueItems: true, default: DEFAULTS.return_reasons,
      items: { type: 'string', pattern: '^[a-z][a-z0-9_]{0,63}$', chars: '[a-z0-9_]', hint: 'must be a snake_case word, got {what}' },
    },
  },
  required: ['id', 'price'],
  additionalProperties: false,
} as const;

const BUCKET = {
  type: 'object',
  properties: {
    id: ID,
    default: { type: 'boolean', nullable: true },
    states: STATES,
    zip_prefixes: ZIP_PREFIXES,
  },
  required: ['id'],
  additionalProperties: false,
} as const;

const routingFileSchema = {
  $id: 'https://leadpost.example/schemas/routing.json',
  type: 'object',
  properties: {
    currency: { type: 'string', nullable: true, pattern: '^[A-Z]{3}$', default: DEFAULTS.currency, hint: 'must be an ISO 4217 code of 3 upper-case letters, got {value}' },
    strategy: { type: 'string', nullable: true, enum: STRATEGIES, default: DEFAULTS.strategy, hint: 'must be highest_price, priority or round_robin, got {value}' },
    duplicate_window_days: { ...INTEGER_0, nullable: true, default: DEFAULTS.duplicate_window_days },
    min_bid: AMOUNT,
    buyers: { type: 'array', items: BUYER },
    buckets: { type: 'array', nullable: true, items: BUCKET },
  },
  required: ['buyers'],
  additionalProperties: false,
} as const satisfies JSONSchemaType<RoutingFile>;

function isTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

function isHttpsUrl(value: string): boolean {
  return URL.canParse(value) && new URL(value).protocol === 'https:';
}

function compile(allErrors: boolean) {
  const ajv = new Ajv({ allErrors, verbose: true, discriminator: true, multipleOfPrecision: 9, strict: true });
  ajv.addKeyword('hint');
  ajv.addKeyword('chars');
  ajv.addFormat('time-zone', { type: 'string', validate: isTimeZone });
  ajv.addFormat('https-url', { type: 'string', validate: isHttpsUrl });
  return ajv.compile<RoutingFile>(routingFileSchema);
}

/**
 * Structural check of a parsed routing file, every error listed; cross-field rules live in
 * `config-checks.ts`. Each error is a few hundred bytes held at once: give it a file of bounded
 * size (config-checks gives it one entry at a time).
 */
export const validateRoutingFile = compile(true);

/** The same check stopping at the first error: any file, however large or wrong, at no cost. */
export const isRoutingFile = compile(false);

/** Every field name the schema knows, at any depth. */
export const FIELD_NAMES: ReadonlySet<string> = new Set(fieldNames(routingFileSchema));

function* fieldNames(schema: unknown): Generator<string> {
  if (typeof schema !== 'object' || schema === null) return;
  const { properties } = schema as { properties?: Record<string, unknown> };
  if (properties) yield* Object.keys(properties);
  for (const value of Object.values(schema)) yield* fieldNames(value);
}
