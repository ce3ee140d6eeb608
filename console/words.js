// The service's outcome codes in the words a lead business uses: the console's one list of them.
// Wherever a code is shown (a lead's row or page, the breakdown by code, the report's columns, the
// code filter) it reads as these words, and the code itself stays at hand: in a small code element
// beside the words, or as the words' tooltip where room is short (a column's heading), since it is
// what the API, the CSV and a supplier's integration use.

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
