import { expect } from 'chai';
import { problemsOf } from './fixtures.js';

const buyer = (fields: object) => ({ buyers: [{ id: 'acme-law', price: 42.5, ...fields }] });
const webhook = (fields: object) => buyer({ delivery: { kind: 'webhook', url: 'https://buyer.example/leads', ...fields } });
const pingHook = (fields: object) => buyer({ ping: { kind: 'webhook', url: 'https://buyer.example/bids', ...fields } });

interface Rule {
  readonly rule: string;
  readonly good: unknown;
  readonly bad: unknown;
  readonly error: string;
}

// Each rule: a file that loads, and the smallest change to it that must be refused with exactly this line.
const RULES: Rule[] = [
  { rule: 'currency is 3 upper-case letters', good: { currency: 'EUR', buyers: [] }, bad: { currency: 'usd', buyers: [] }, error: "currency: must be an ISO 4217 code of 3 upper-case letters, got 'usd'" },
  { rule: 'currency is an ISO 4217 currency, not any 3 letters (a typo)', good: { currency: 'USD', buyers: [] }, bad: { currency: 'UDS', buyers: [] }, error: "currency: must be an ISO 4217 currency code such as USD, EUR or CAD; 'UDS' is none" },
  { rule: 'currency is a currency, not the code ISO 4217 keeps for testing', good: { currency: 'CAD', buyers: [] }, bad: { currency: 'XTS', buyers: [] }, error: "currency: must be an ISO 4217 currency code such as USD, EUR or CAD; 'XTS' is none" },
  { rule: 'strategy is one of three', good: { strategy: 'round_robin', buyers: [] }, bad: { strategy: 'cheapest', buyers: [] }, error: "strategy: must be highest_price, priority or round_robin, got 'cheapest'" },
  { rule: 'duplicate_window_days is an integer', good: { duplicate_window_days: 0, buyers: [] }, bad: { duplicate_window_days: 1.5, buyers: [] }, error: 'duplicate_window_days: must be an integer, got 1.5' },
  { rule: 'duplicate_window_days is not negative', good: { duplicate_window_days: 90, buyers: [] }, bad: { duplicate_window_days: -1, buyers: [] }, error: 'duplicate_window_days: must be >= 0' },
  { rule: 'buyers is required', good: { buyers: [] }, bad: {}, error: 'buyers: is required' },
  { rule: 'a typo at the top level is an error', good: { buyers: [] }, bad: { buyers: [], strategi: 'priority' }, error: 'strategi: unknown field' },
  { rule: 'the file is an object', good: { buyers: [] }, bad: [], error: 'must be an object, got an empty array' },
  { rule: 'buyer id is lower-case', good: buyer({ id: 'acme.law_2-b' }), bad: buyer({ id: 'Acme' }), error: 'buyers[0].id: must be 1-64 of a-z 0-9 . _ - starting with a letter or digit, got a string of 4 characters with an upper-case letter at character 1' },
  { rule: 'buyer id is at most 64 characters', good: buyer({ id: 'a'.repeat(64) }), bad: buyer({ id: 'a'.repeat(65) }), error: 'buyers[0].id: must be 1-64 of a-z 0-9 . _ - starting with a letter or digit, got a string of 65 characters' },
  { rule: 'buyer id is required', good: buyer({}), bad: { buyers: [{ price: 1 }] }, error: 'buyers[0].id: is required' },
  { rule: 'price is required', good: buyer({}), bad: { buyers: [{ id: 'acme-law' }] }, error: 'buyers[0].price: is required' },
  { rule: 'price has at most 2 decimals', good: buyer({ price: 19.99 }), bad: buyer({ price: 1.234 }), error: 'buyers[0].price: must have at most 2 decimal places, got 1.234' },
  { rule: 'price is not negative', good: buyer({ price: 0 }), bad: buyer({ price: -1 }), error: 'buyers[0].price: must be >= 0' },
  { rule: 'price is a number', good: buyer({ price: 0.07 }), bad: buyer({ price: '42' }), error: 'buyers[0].price: must be a number, got a string of 2 characters' },
  { rule: 'name is a string', good: buyer({ name: 'Acme Law Group' }), bad: buyer({ name: 7 }), error: 'buyers[0].name: must be a string, got a number' },
  { rule: 'priority is an integer', good: buyer({ priority: 0 }), bad: buyer({ priority: 1.5 }), error: 'buyers[0].priority: must be an integer, got 1.5' },
  { rule: 'active is a boolean', good: buyer({ active: false }), bad: buyer({ active: 'no' }), error: 'buyers[0].active: must be a boolean, got a string of 2 characters' },
  { rule: 'null is not "left out"', good: buyer({ active: true }), bad: buyer({ active: null }), error: 'buyers[0].active: must not be null (leave the field out instead)' },
  { rule: 'states are upper-case USPS codes', good: buyer({ states: ['CA', 'DC', 'PR'] }), bad: buyer({ states: ['CA', 'ca'] }), error: "buyers[0].states[1]: must be an upper-case USPS state code (incl. DC, PR), got 'ca'" },
  { rule: 'states are real states', good: buyer({ states: ['WY'] }), bad: buyer({ states: ['XX'] }), error: "buyers[0].states[0]: must be an upper-case USPS state code (incl. DC, PR), got 'XX'" },
  { rule: 'states are not empty', good: buyer({ states: ['TX'] }), bad: buyer({ states: [] }), error: 'buyers[0].states: must NOT have fewer than 1 items' },
  { rule: 'states are not repeated', good: buyer({ states: ['TX', 'FL'] }), bad: buyer({ states: ['TX', 'TX'] }), error: 'buyers[0].states: must NOT have duplicate items (items ## 1 and 0 are identical)' },
  { rule: 'zip prefixes are 1-5 digits', good: buyer({ zip_prefixes: ['9', '90210'] }), bad: buyer({ zip_prefixes: ['902100'] }), error: 'buyers[0].zip_prefixes[0]: must be 1-5 digits, got a string of 6 characters' },
  { rule: 'zip prefixes are digits', good: buyer({ zip_prefixes: ['77'] }), bad: buyer({ zip_prefixes: ['7a'] }), error: "buyers[0].zip_prefixes[0]: must be 1-5 digits, got '7a'" },
  { rule: "a requirement is 'pass' or 'not_fail'", good: buyer({ require: { phone: 'not_fail' } }), bad: buyer({ require: { phone: 'required' } }), error: "buyers[0].require.phone: must be 'pass' or 'not_fail', got 'required'" },
  { rule: 'requirements are phone, email, consent', good: buyer({ require: { consent: 'pass' } }), bad: buyer({ require: { fax: 'pass' } }), error: 'buyers[0].require.fax: unknown field' },
  { rule: 'a cap period is hour, day, week or month', good: buyer({ caps: [{ period: 'week', max: 0 }] }), bad: buyer({ caps: [{ period: 'year', max: 1 }] }), error: "buyers[0].caps[0].period: must be hour, day, week or month, got 'year'" },
  { rule: 'a cap max is a non-negative integer', good: buyer({ caps: [{ period: 'day', max: 100 }] }), bad: buyer({ caps: [{ period: 'day', max: -1 }] }), error: 'buyers[0].caps[0].max: must be >= 0' },
  { rule: 'a cap max is required', good: buyer({ caps: [{ period: 'day', max: 1 }] }), bad: buyer({ caps: [{ period: 'day' }] }), error: 'buyers[0].caps[0].max: is required' },
  { rule: 'a cap time zone is a real zone', good: buyer({ caps: [{ period: 'day', max: 1, tz: 'Asia/Kolkata' }] }), bad: buyer({ caps: [{ period: 'day', max: 1 }, { period: 'day', max: 1, tz: 'Mars/Olympus' }] }), error: "buyers[0].caps[1].tz: unknown time zone 'Mars/Olympus'" },
  { rule: 'a buyer has one cap per period and zone', good: buyer({ caps: [{ period: 'day', max: 100 }, { period: 'hour', max: 10 }] }), bad: buyer({ caps: [{ period: 'day', max: 100 }, { period: 'hour', max: 10 }, { period: 'day', max: 50 }] }), error: "buyers[0].caps[2].period: a second 'day' cap in 'UTC' (also buyers[0].caps[0]); only the lower max would ever count" },
  { rule: 'a cap left without tz is in UTC, for the one-per-period rule too', good: buyer({ caps: [{ period: 'day', max: 100, tz: 'America/Los_Angeles' }, { period: 'day', max: 200 }] }), bad: buyer({ caps: [{ period: 'day', max: 100, tz: 'UTC' }, { period: 'day', max: 200 }] }), error: "buyers[0].caps[1].period: a second 'day' cap in 'UTC' (also buyers[0].caps[0]); only the lower max would ever count" },
  { rule: 'a second cap in the same zone spelled another way is refused, naming both spellings', good: buyer({ caps: [{ period: 'day', max: 100, tz: 'America/Los_Angeles' }, { period: 'day', max: 5, tz: 'America/New_York' }] }), bad: buyer({ caps: [{ period: 'day', max: 100, tz: 'America/Los_Angeles' }, { period: 'day', max: 5, tz: 'US/Pacific' }] }), error: "buyers[0].caps[1].period: a second 'day' cap in 'US/Pacific' (also buyers[0].caps[0], in 'America/Los_Angeles': both are America/Los_Angeles); only the lower max would ever count" },
  { rule: 'a zone name in lower case is the same zone for the one-per-period rule', good: buyer({ caps: [{ period: 'day', max: 7, tz: 'america/los_angeles' }] }), bad: buyer({ caps: [{ period: 'day', max: 100, tz: 'America/Los_Angeles' }, { period: 'day', max: 7, tz: 'america/los_angeles' }] }), error: "buyers[0].caps[1].period: a second 'day' cap in 'america/los_angeles' (also buyers[0].caps[0], in 'America/Los_Angeles': both are America/Los_Angeles); only the lower max would ever count" },
  { rule: 'PST8PDT is Los Angeles for the one-per-period rule', good: buyer({ caps: [{ period: 'day', max: 3, tz: 'PST8PDT' }, { period: 'week', max: 9, tz: 'US/Pacific' }] }), bad: buyer({ caps: [{ period: 'day', max: 3, tz: 'PST8PDT' }, { period: 'day', max: 5, tz: 'US/Pacific' }] }), error: "buyers[0].caps[1].period: a second 'day' cap in 'US/Pacific' (also buyers[0].caps[0], in 'PST8PDT': both are America/Los_Angeles); only the lower max would ever count" },
  { rule: 'Etc/UTC is the UTC a cap without tz is in', good: buyer({ caps: [{ period: 'month', max: 50 }, { period: 'week', max: 9, tz: 'Etc/UTC' }] }), bad: buyer({ caps: [{ period: 'month', max: 50 }, { period: 'month', max: 9, tz: 'Etc/UTC' }] }), error: "buyers[0].caps[1].period: a second 'month' cap in 'Etc/UTC' (also buyers[0].caps[0], in 'UTC': both are UTC); only the lower max would ever count" },
  { rule: 'utc in lower case is Etc/UTC for the one-per-period rule', good: buyer({ caps: [{ period: 'month', max: 8, tz: 'utc' }] }), bad: buyer({ caps: [{ period: 'month', max: 9, tz: 'Etc/UTC' }, { period: 'month', max: 8, tz: 'utc' }] }), error: "buyers[0].caps[1].period: a second 'month' cap in 'utc' (also buyers[0].caps[0], in 'Etc/UTC': both are UTC); only the lower max would ever count" },
  { rule: 'a cap has no other fields', good: buyer({ caps: [{ period: 'day', max: 1 }] }), bad: buyer({ caps: [{ period: 'day', limit: 1, max: 1 }] }), error: 'buyers[0].caps[0].limit: unknown field' },
  { rule: 'hours start is HH:MM', good: buyer({ hours: { tz: 'UTC', start: '00:00', end: '23:59' } }), bad: buyer({ hours: { tz: 'UTC', start: '8:00', end: '18:00' } }), error: "buyers[0].hours.start: must be HH:MM (00:00-23:59), got '8:00'" },
  { rule: 'hours start is before midnight', good: buyer({ hours: { tz: 'UTC', start: '23:00', end: '24:00' } }), bad: buyer({ hours: { tz: 'UTC', start: '24:00', end: '06:00' } }), error: "buyers[0].hours.start: must be HH:MM (00:00-23:59), got '24:00'" },
  { rule: 'hours end is HH:MM', good: buyer({ hours: { tz: 'UTC', start: '22:00', end: '06:00' } }), bad: buyer({ hours: { tz: 'UTC', start: '08:00', end: '18:60' } }), error: "buyers[0].hours.end: must be HH:MM (00:00-24:00), got '18:60'" },
  { rule: 'hours are not an empty window', good: buyer({ hours: { tz: 'UTC', start: '00:00', end: '24:00' } }), bad: buyer({ hours: { tz: 'UTC', start: '08:00', end: '08:00' } }), error: "buyers[0].hours.end: must differ from start '08:00' (use 00:00-24:00 for the whole day)" },
  { rule: 'hours need a time zone', good: buyer({ hours: { tz: 'America/New_York', start: '08:00', end: '18:00' } }), bad: buyer({ hours: { start: '08:00', end: '18:00' } }), error: 'buyers[0].hours.tz: is required' },
  { rule: 'hours time zone is a real zone', good: buyer({ hours: { tz: 'Europe/Berlin', start: '08:00', end: '18:00' } }), bad: buyer({ hours: { tz: 'Europe/Atlantis', start: '08:00', end: '18:00' } }), error: "buyers[0].hours.tz: unknown time zone 'Europe/Atlantis'" },
  { rule: 'hours days are mon..sun', good: buyer({ hours: { tz: 'UTC', days: ['sat', 'sun'], start: '08:00', end: '18:00' } }), bad: buyer({ hours: { tz: 'UTC', days: ['mon', 'Tue'], start: '08:00', end: '18:00' } }), error: "buyers[0].hours.days[1]: must be one of mon, tue, wed, thu, fri, sat, sun, got 'Tue'" },
  { rule: 'delivery kind is pull or webhook', good: buyer({ delivery: { kind: 'pull' } }), bad: buyer({ delivery: { kind: 'ftp' } }), error: "buyers[0].delivery.kind: must be 'pull' or 'webhook', got 'ftp'" },
  { rule: 'delivery kind is required', good: buyer({ delivery: { kind: 'pull' } }), bad: buyer({ delivery: {} }), error: 'buyers[0].delivery.kind: is required' },
  { rule: 'a pull delivery has no url', good: buyer({ delivery: { kind: 'pull' } }), bad: buyer({ delivery: { kind: 'pull', url: 'https://buyer.example/leads' } }), error: 'buyers[0].delivery.url: unknown field' },
  { rule: 'a webhook url is required', good: webhook({}), bad: buyer({ delivery: { kind: 'webhook' } }), error: 'buyers[0].delivery.url: is required' },
  { rule: 'a webhook url is https', good: webhook({ url: 'https://buyer.example:8443/in?src=leadpost' }), bad: webhook({ url: 'http://buyer.example/leads' }), error: 'buyers[0].delivery.url: must be an absolute https:// URL, got an http:// URL' },
  { rule: 'a webhook timeout is at least 1 ms', good: webhook({ timeout_ms: 1 }), bad: webhook({ timeout_ms: 0 }), error: 'buyers[0].delivery.timeout_ms: must be >= 1' },
  { rule: 'a webhook timeout is at most a minute', good: webhook({ timeout_ms: 60000 }), bad: webhook({ timeout_ms: 60001 }), error: 'buyers[0].delivery.timeout_ms: must be at most 60000 (a minute), got 60001' },
  { rule: 'a webhook timeout with extra zeros (over what a timer takes) is refused, not failed as a timeout at once', good: webhook({ timeout_ms: 30000 }), bad: webhook({ timeout_ms: 3000000000 }), error: 'buyers[0].delivery.timeout_ms: must be at most 60000 (a minute), got 3000000000' },
  { rule: 'a ping timeout is at least 1 ms', good: pingHook({ timeout_ms: 1 }), bad: pingHook({ timeout_ms: 0 }), error: 'buyers[0].ping.timeout_ms: must be >= 1' },
  { rule: 'a ping timeout is at most the highest PING_DEADLINE_MS', good: pingHook({ timeout_ms: 60000 }), bad: pingHook({ timeout_ms: 60001 }), error: 'buyers[0].ping.timeout_ms: must be at most 60000 (the highest PING_DEADLINE_MS: the round of bids closes by then), got 60001' },
  { rule: 'a ping timeout over what AbortSignal.timeout takes is refused, not a 500 on every ping', good: pingHook({ timeout_ms: 500 }), bad: pingHook({ timeout_ms: 5000000000 }), error: 'buyers[0].ping.timeout_ms: must be at most 60000 (the highest PING_DEADLINE_MS: the round of bids closes by then), got 5000000000' },
  { rule: 'a webhook makes at least one attempt', good: webhook({ max_attempts: 1 }), bad: webhook({ max_attempts: 0 }), error: 'buyers[0].delivery.max_attempts: must be >= 1' },
  { rule: 'a webhook secret_env names a variable', good: webhook({ secret_env: 'ACME_WEBHOOK_SECRET' }), bad: webhook({ secret_env: 'acme-secret' }), error: 'buyers[0].delivery.secret_env: must name an environment variable (A-Z 0-9 _) that holds the secret, not the secret itself; got a string of 11 characters' },
  { rule: 'a ping max_bid has at most 2 decimals', good: pingHook({ max_bid: 150.25 }), bad: pingHook({ max_bid: 150.001 }), error: 'buyers[0].ping.max_bid: must have at most 2 decimal places, got 150.001' },
  { rule: 'a ping max_bid is not negative', good: pingHook({ max_bid: 0 }), bad: pingHook({ max_bid: -1 }), error: 'buyers[0].ping.max_bid: must be >= 0' },
  { rule: 'a static bidder has no max_bid (it bids its price)', good: buyer({ ping: { kind: 'static' } }), bad: buyer({ ping: { kind: 'static', max_bid: 50 } }), error: 'buyers[0].ping.max_bid: unknown field' },
  { rule: 'a ping max_bid is at least min_bid', good: { min_bid: 5, ...pingHook({ max_bid: 5 }) }, bad: { min_bid: 5, ...pingHook({ max_bid: 4.99 }) }, error: 'buyers[0].ping.max_bid: must be at least min_bid 5, got 4.99' },
  { rule: 'a min_bid over the 10000 ceiling needs each webhook bidder to set a max_bid', good: { min_bid: 10000.01, ...pingHook({ max_bid: 20000 }) }, bad: { min_bid: 10000.01, ...pingHook({}) }, error: 'buyers[0].ping.max_bid: is required when min_bid 10000.01 is over the ceiling a bid has without one (10000)' },
  { rule: 'return_window_days is not negative', good: buyer({ return_window_days: 0 }), bad: buyer({ return_window_days: -7 }), error: 'buyers[0].return_window_days: must be >= 0' },
  { rule: 'return reasons are snake_case words', good: buyer({ return_reasons: ['wrong_number'] }), bad: buyer({ return_reasons: ['Bad Phone'] }), error: 'buyers[0].return_reasons[0]: must be a snake_case word, got a string of 9 characters with an upper-case letter at character 1' },
  // What a refusal echoes: a short code helps and holds nothing of a person; anything else is said by its kind and length.
  { rule: 'a wrong type is said by its kind and size, not echoed: an object', good: buyer({ require: { phone: 'pass' } }), bad: buyer({ require: [{ phone: 'pass' }, 'x'] }), error: 'buyers[0].require: must be an object, got an array of 2' },
  { rule: 'a wrong type is said by its kind and size, not echoed: an array', good: buyer({ states: ['CA'] }), bad: buyer({ states: { first_name: 'Ada', email: 'ada@example.com' } }), error: 'buyers[0].states: must be an array, got an object of 2 keys' },
  { rule: 'a fraction where an integer goes is shown: it is the mistake', good: buyer({ caps: [{ period: 'day', max: 3 }] }), bad: buyer({ caps: [{ period: 'day', max: 2.5 }] }), error: 'buyers[0].caps[0].max: must be an integer, got 2.5' },
  { rule: 'a number too large for JSON to hold is said so, not shown as null', good: buyer({ price: 1e6 }), bad: buyer({ price: Infinity }), error: 'buyers[0].price: must be a number, got a number too large to hold' },
  { rule: 'an e-mail where a state code goes is not echoed', good: buyer({ states: ['TX'] }), bad: buyer({ states: ['ada.lovelace@outlook.com'] }), error: 'buyers[0].states[0]: must be an upper-case USPS state code (incl. DC, PR), got a string of 24 characters' },
  { rule: 'a phone number where a ZIP prefix goes is not echoed', good: buyer({ zip_prefixes: ['902'] }), bad: buyer({ zip_prefixes: ['+12135550143'] }), error: 'buyers[0].zip_prefixes[0]: must be 1-5 digits, got a string of 12 characters' },
  { rule: 'a name with a space where a period goes is not echoed', good: buyer({ caps: [{ period: 'hour', max: 1 }] }), bad: buyer({ caps: [{ period: 'Ada Lovelace', max: 1 }] }), error: 'buyers[0].caps[0].period: must be hour, day, week or month, got a string of 12 characters' },
  { rule: 'a long value where a code goes is not echoed, however long', good: { strategy: 'priority', buyers: [] }, bad: { strategy: 'x'.repeat(100_000), buyers: [] }, error: 'strategy: must be highest_price, priority or round_robin, got a string of 100000 characters' },
  { rule: 'an id is never echoed, even one that would fit a message', good: buyer({ id: 'acme' }), bad: buyer({ id: 'ada.lovelace@outlook.com' }), error: "buyers[0].id: must be 1-64 of a-z 0-9 . _ - starting with a letter or digit, got a string of 24 characters with '@' at character 13" },
  { rule: 'a URL is never echoed: its path or query may carry a token', good: webhook({}), bad: webhook({ url: 'ftp://buyer.example/leads?token=abc' }), error: 'buyers[0].delivery.url: must be an absolute https:// URL, got an ftp:// URL' },
  { rule: 'a URL that does not parse is not echoed', good: webhook({}), bad: webhook({ url: 'buyer.example/leads?token=abc' }), error: 'buyers[0].delivery.url: must be an absolute https:// URL, got a string of 29 characters that is no URL' },
  { rule: 'a secret pasted into secret_env is never echoed', good: pingHook({ secret_env: 'ACME_BID_SECRET' }), bad: pingHook({ secret_env: 'whsec_9f8e7d6c5b4a39281706f5e4d3c2b1a0' }), error: 'buyers[0].ping.secret_env: must name an environment variable (A-Z 0-9 _) that holds the secret, not the secret itself; got a string of 38 characters' },
  { rule: 'an unknown field named like a field is named', good: buyer({}), bad: buyer({ email: 'ada@example.com' }), error: 'buyers[0].email: unknown field' },
  { rule: 'an unknown field named by an e-mail is not named', good: buyer({}), bad: buyer({ 'ada.lovelace@outlook.com': 'Ada' }), error: 'buyers[0].*: unknown field, named with other characters than letters, digits, _ and - (its name is not repeated here)' },
  { rule: 'a typo in a buyer is an error', good: buyer({ priority: 1 }), bad: buyer({ priorty: 1 }), error: 'buyers[0].priorty: unknown field' },
  { rule: 'buyer ids are unique', good: { buyers: [{ id: 'a', price: 1 }, { id: 'b', price: 1 }] }, bad: { buyers: [{ id: 'a', price: 1 }, { id: 'b', price: 1 }, { id: 'a', price: 2 }] }, error: 'buyers[2].id: duplicate buyer id (the same as buyers[0].id)' },
  { rule: 'bucket ids are unique', good: { buyers: [], buckets: [{ id: 'unsold', default: true }, { id: 'unsold-tx', states: ['TX'] }] }, bad: { buyers: [], buckets: [{ id: 'unsold', default: true }, { id: 'unsold', states: ['TX'] }] }, error: 'buckets[1].id: duplicate bucket id (the same as buckets[0].id)' },
  { rule: 'a bucket list has a default', good: { buyers: [], buckets: [{ id: 'unsold', default: true }] }, bad: { buyers: [], buckets: [{ id: 'unsold' }] }, error: 'buckets: no bucket is marked "default": true; exactly one must be' },
  { rule: 'a bucket list has one default only', good: { buyers: [], buckets: [{ id: 'a', default: true }, { id: 'b', default: false }] }, bad: { buyers: [], buckets: [{ id: 'a', default: true }, { id: 'b', default: true }] }, error: 'buckets[1].default: only one bucket may be the default (buckets[0] already is)' },
  { rule: 'the default bucket has no filter', good: { buyers: [], buckets: [{ id: 'unsold', default: true }] }, bad: { buyers: [], buckets: [{ id: 'unsold', default: true, zip_prefixes: ['9'] }] }, error: 'buckets[0].zip_prefixes: the default bucket takes every lead no other bucket matched; it cannot have filters' },
  { rule: 'bucket states are USPS codes', good: { buyers: [], buckets: [{ id: 'u', default: true }, { id: 'tx', states: ['TX'] }] }, bad: { buyers: [], buckets: [{ id: 'u', default: true }, { id: 'tx', states: ['Texas'] }] }, error: "buckets[1].states[0]: must be an upper-case USPS state code (incl. DC, PR), got 'Texas'" },
  { rule: 'a typo in a bucket is an error', good: { buyers: [], buckets: [{ id: 'u', default: true }] }, bad: { buyers: [], buckets: [{ id: 'u', defualt: true }, { id: 'v', default: true }] }, error: 'buckets[0].defualt: unknown field' },
];

describe('routing file schema', function () {
  for (const { rule, good, bad, error } of RULES) {
    describe(rule, function () {
      it('given a good value, when loaded, then it is accepted', function () {
        expect(problemsOf(good)).to.deep.equal([]);
      });

      it('given a bad value, when loaded, then the error names the field', function () {
        expect(problemsOf(bad)).to.deep.equal([`test.json: ${error}`]);
      });
    });
  }
});
