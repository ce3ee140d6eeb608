// A buyer's `Retry-After` (RFC 9110 §10.2.3), read as the wait it asks for. Either delay-seconds
// or an HTTP-date in any of its three forms (recipients must accept all of them). Anything else —
// garbled, negative, a date already past — is no answer, and the normal backoff applies.

const DAY = '(Mon|Tue|Wed|Thu|Fri|Sat|Sun)';
const LONG_DAY = '(Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)';
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const MONTH = `(${MONTHS.join('|')})`;
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';

/** Sun, 06 Nov 1994 08:49:37 GMT */
const IMF_FIXDATE = new RegExp(`^${DAY}, (\\d{2}) ${MONTH} (\\d{4}) ${TIME} GMT$`);
/** Sunday, 06-Nov-94 08:49:37 GMT */
const RFC_850 = new RegExp(`^${LONG_DAY}, (\\d{2})-${MONTH}-(\\d{2}) ${TIME} GMT$`);
/** Sun Nov  6 08:49:37 1994 */
const ASCTIME = new RegExp(`^${DAY} ${MONTH} ( \\d|\\d{2}) ${TIME} (\\d{4})$`);

const DELAY_SECONDS = /^\d+$/;

/**
 * Milliseconds to wait that `value` asks for, counted from `now`, at most `maxMs`; null when the
 * header is missing or says nothing usable.
 */
export function retryAfterMs(value: string | null | undefined, now: Date, maxMs: number): number | null {
  if (value === null || value === undefined) return null;
  const text = value.trim();
  if (DELAY_SECONDS.test(text)) return Math.min(Number(text) * 1000, maxMs);
  const at = httpDate(text, now);
  if (at === null) return null;
  const wait = at - now.getTime();
  return wait < 0 ? null : Math.min(wait, maxMs);
}

function httpDate(text: string, now: Date): number | null {
  let match = IMF_FIXDATE.exec(text);
  if (match) return utc(Number(match[4]), match[3]!, match[2]!, match.slice(5, 8));
  match = RFC_850.exec(text);
  if (match) {
    // A two-digit year more than 50 years ahead is the most recent past year ending in those digits.
    let year = 2000 + Number(match[4]);
    while (year > now.getUTCFullYear() + 50) year -= 100;
    return utc(year, match[3]!, match[2]!, match.slice(5, 8));
  }
  match = ASCTIME.exec(text);
  if (match) return utc(Number(match[7]), match[2]!, match[3]!.trim(), match.slice(4, 7));
  return null;
}

function utc(year: number, month: string, day: string, [h, m, s]: string[]): number | null {
  const monthIndex = MONTHS.indexOf(month);
  const date = new Date(Date.UTC(year, monthIndex, Number(day), Number(h), Number(m), Number(s)));
  // Date.UTC rolls 31 Feb over into March; a date that does not exist is garbled, not a date.
  const exists = date.getUTCDate() === Number(day) && date.getUTCMonth() === monthIndex && date.getUTCHours() === Number(h) && date.getUTCMinutes() === Number(m) && date.getUTCSeconds() === Number(s);
  return exists ? date.getTime() : null;
}
