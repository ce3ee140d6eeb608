// The service's codes in the words a lead business uses: the console's one list of them (outcome
// codes, lead and delivery statuses, event types, feedback, checks). Wherever a code is shown (a
// lead's row or page and its timeline, the breakdown by code, the report's columns, the filters,
// the deliveries and bought leads) it reads as these words, and the code itself stays at hand: in
// a small code element beside the words, or as the words' tooltip where room is short (a column's
// heading, a line of checks), since it is what the API, the CSV and a supplier's integration use.
// A code not listed here still shows, as the service writes it: never a blank.

import { h } from './dom.js';

/** Each code: its words, and for a rejection what it means (the breakdown by code says it under the words). */
export const OUTCOME_CODES = {
  SOLD: { words: 'Sold' },
  UNSOLD: { words: 'Not sold' },
  INVALID: { words: 'Invalid fields', meaning: 'one or more fields are invalid' },
  VERIFICATION_FAILED: { words: 'Failed verification', meaning: 'phone or e-mail verification failed' },
  DUPLICATE: { words: 'Duplicate', meaning: 'the same mobile or e-mail was accepted recently' },
  SUPPRESSED: { words: 'Do not contact', meaning: 'the mobile or e-mail is on the suppression list' },
  PING_EXPIRED: { words: 'Ping expired', meaning: 'its ping had expired' },
  PING_CONSUMED: { words: 'Ping already used', meaning: 'its ping was already posted' },
  PING_MISMATCH: { words: 'Does not match its ping', meaning: "its zip, state or sid differ from its ping's" },
};

/** The codes a rejected lead may have, in the order the console lists them. */
export const REJECTION_CODES = Object.keys(OUTCOME_CODES).filter((code) => OUTCOME_CODES[code].meaning);

/** A lead's status in words. */
const STATUSES = { received: 'Received', sold: 'Sold', unsold: 'Not sold', rejected: 'Rejected' };

/** A code in words; one the console does not know yet, as the service writes it, underscores as spaces. */
export const codeWords = (code) => OUTCOME_CODES[code]?.words ?? String(code).replaceAll('_', ' ');

/** What a rejection code means, or undefined. */
export const codeMeaning = (code) => OUTCOME_CODES[code]?.meaning;

/** A status in words; an unknown one as it is. */
export const statusWords = (status) => STATUSES[status] ?? status ?? '';

/** A code shown: its words, the code in a small code element after them (and as their tooltip). */
export function codeShown(code) {
  if (!code) return '';
  return h('span', { class: 'code-words', title: code, 'data-code': code }, codeWords(code), ' ', h('code', { class: 'code' }, code));
}

/** A code where room is short (a column's heading): its words, the code as their tooltip. */
export const codeTitled = (code) => h('span', { title: code, 'data-code': code }, codeWords(code));

/**
 * Any code shown with its words: the code in a small code element after them (and as their
 * tooltip). Where the words only capitalise the code ("Delivered", `delivered`) the code is their
 * tooltip alone, rather than the same word twice.
 */
export function wordsShown(words, code, attributes = {}) {
  const same = words.toLowerCase() === String(code).toLowerCase();
  return h('span', { class: 'code-words', title: code, 'data-code': code, ...attributes }, words, same ? null : [' ', h('code', { class: 'code' }, code)]);
}

/** A code the console has no words for: as the service writes it, underscores as spaces; never blank. */
const asWritten = (code) => String(code ?? '—').replaceAll('_', ' ');

/** What happened to a lead or its ping, by event type: the timeline's headings. */
const EVENT_TYPES = {
  LeadPinged: 'Pinged',
  PingBidsCollected: 'Bids collected',
  PingPosted: 'Posted against the ping',
  PingPostReleased: 'Post taken back',
  LeadReceived: 'Received',
  LeadPingMatched: 'Matched to its ping',
  LeadRejected: 'Rejected',
  LeadEnriched: 'Checked',
  LeadRouted: 'Routed',
  LeadSold: 'Sold',
  LeadDelivered: 'Delivered',
  LeadDeliveryCancelled: 'Delivery cancelled',
  LeadRedeliveryRequested: 'Sent again',
  FeedbackRecorded: 'Feedback',
  LeadReturned: 'Returned',
  LeadPersonalDataErased: 'Personal data erased',
  LeadPersonalDataExpired: 'Personal data expired',
  ErasureNoticeSent: 'Erasure notice sent',
  ErasureNoticeFailed: 'Erasure notice failed',
  ErasureNoticeRedeliveryRequested: 'Erasure notice sent again',
};

/** An event in words; a delivery attempt, or its failure, with the attempt's number. A type not listed: as written. */
export function eventWords(event) {
  const attempt = event.data?.attempt;
  const numbered = attempt == null ? 'Delivery attempt' : `Delivery attempt ${attempt}`;
  if (event.type === 'LeadDeliveryAttempted') return numbered;
  if (event.type === 'LeadDeliveryFailed') return `${numbered} failed`;
  return EVENT_TYPES[event.type] ?? String(event.type);
}

/** A delivery's status (the API's pending, delivered, failed, cancelled). */
const DELIVERY_STATUSES = { pending: 'Pending', delivered: 'Delivered', failed: 'Failed', cancelled: 'Cancelled' };

export const deliveryStatusWords = (status) => DELIVERY_STATUSES[status] ?? asWritten(status);
export const deliveryStatusShown = (status) => wordsShown(deliveryStatusWords(status), status);

/** Why a webhook attempt (a lead's, an erasure notice's) failed: the API's error, by the answer's hundred for HTTP. */
const DELIVERY_ERRORS = {
  // A redirect is final: the service follows none (an endpoint moved, http→https), and says so.
  http_3xx: 'redirected (not followed)',
  http_4xx: 'refused by the buyer',
  http_5xx: 'buyer error',
  timeout: 'no answer in time',
  connection_error: 'could not connect',
  attempt_lost: 'attempt lost (no outcome recorded)',
  not_webhook: 'the buyer takes no webhooks now',
};

/** A delivery error in words; another hundred of HTTP is an answer the buyer gave, anything else as written. */
export const deliveryErrorWords = (error) => DELIVERY_ERRORS[error] ?? (/^http_\dxx$/.test(error) ? 'answered' : asWritten(error));

/** A delivery error shown: its words, the error as written their tooltip (a sentence has no room for both). */
export const deliveryErrorShown = (error) => h('span', { title: error, 'data-code': error }, deliveryErrorWords(error));


/** Why a buyer could take a lead or not, in its routing (a candidate's reason). */
const CANDIDATE_REASONS = {
  eligible: 'eligible',
  state_not_allowed: 'state not taken',
  zip_not_allowed: 'ZIP not taken',
  outside_hours: 'outside its hours',
  cap_reached: 'cap reached',
  inactive: 'not active',
  requirement_failed: 'a check it requires did not pass',
  bidder_resting: 'resting after failing pings in a row',
};

/** How the routing chose among the buyers that could take a lead. */
const STRATEGIES = { highest_price: 'highest price', priority: 'priority', round_robin: 'round robin' };

/** What a buyer answered to a ping. */
const BID_RESULTS = {
  bid: 'bid',
  no_bid: 'no bid',
  ineligible: 'not eligible',
  below_min_bid: 'below the minimum bid',
  above_max_bid: 'above the maximum bid',
  invalid: 'answer not understood',
  timeout: 'no answer in time',
  error: 'answer failed',
};

/** A code within a sentence or a cell of words: its words, the code as written their tooltip. */
const titled = (list) => (code) => h('span', { title: code, 'data-code': code }, list[code] ?? asWritten(code));
export const candidateReasonShown = titled(CANDIDATE_REASONS);
export const strategyShown = titled(STRATEGIES);
export const bidResultShown = titled(BID_RESULTS);
/** Why a bid was not taken: a buyer not eligible has a candidate's reason, anything else is as written. */
export const bidDetailShown = titled(CANDIDATE_REASONS);

/** A buyer's feedback: what it said of a lead. */
const FEEDBACK_TYPES = { return: 'Returned', conversion: 'Converted', contacted: 'Contacted' };

/** A return reason is the buyer's own word (its routing's return_reasons): written with spaces. */
export const reasonWords = (reason) => asWritten(reason);

/** Feedback in words: "Returned: bad phone"; as the API writes it, "return (bad_phone)", at hand. */
export function feedbackShown(feedback) {
  const words = FEEDBACK_TYPES[feedback.type] ?? asWritten(feedback.type);
  return wordsShown(feedback.reason ? `${words}: ${reasonWords(feedback.reason)}` : words, feedback.reason ? `${feedback.type} (${feedback.reason})` : feedback.type);
}

/** A lead's checks, and what each found. */
const CHECKS = { phone: 'Phone', email: 'E-mail', consent: 'Consent' };
const CHECK_RESULTS = { pass: 'Passed', fail: 'Failed', unknown: 'Not known' };

export const checkWords = (name) => CHECKS[name] ?? asWritten(name);
export const checkResultWords = (result) => CHECK_RESULTS[result] ?? asWritten(result);

/**
 * A check's result, "Passed", "Failed" or "Not known" in its tone, then what it found in words
 * ("Failed (toll free)"); each as written is its tooltip, where a line of several checks has no room for
 * the codes beside the words.
 */
export function checkShown(check) {
  if (!check) return '—';
  const tone = check.result === 'pass' ? 'yes' : check.result === 'fail' ? 'no' : undefined;
  return [
    h('span', { class: tone, title: check.result, 'data-code': check.result }, checkResultWords(check.result)),
    check.detail ? [' (', h('span', { title: check.detail, 'data-code': check.detail }, asWritten(check.detail)), ')'] : null,
  ];
}
