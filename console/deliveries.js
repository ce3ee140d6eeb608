// Deliveries by status, newest first (GET /functions/deliveries). A row opens its lead's page:
// by click anywhere on the row, or by keyboard through the link in its first cell. Each row says
// how its lead reaches the buyer (delivery_kind: the service sends it by webhook, or the buyer
// pulls it), and a failed webhook attempt shows why (last_error) and when the worker tries again
// (next_attempt_at). For an admin, a delivery that failed for good has a Send again button
// (POST /functions/deliveries/{id}/redeliver), for once the buyer has fixed its side: the row then
// shows the delivery as the answer gives it, pending again. An erased lead has no delivery left to
// make, but the lead.erased notice to its buyer may have failed for good: its row has a Send
// notice again button instead, which the same request answers by re-opening the notice.

import { getJson, postJson, explain } from './api.js';
import { h, field, select, say, time, things, badge, onMore, oneAtATime, cards, hideEmpty, outOfDate } from './dom.js';
import { deliveryStatusWords, deliveryStatusShown, deliveryErrorShown } from './words.js';

const STATUSES = [['', 'Any'], ...['pending', 'delivered', 'failed', 'cancelled'].map((s) => [s, deliveryStatusWords(s)])];

/**
 * The buyer's last answer in one cell (last_error in words, as written their tooltip as on the
 * lead's page, with the HTTP status it gave): one column rather than two keeps a webhook row within
 * a laptop's width.
 */
function lastAnswer(row) {
  // A no-break space: "HTTP" and its status stay on one line when the cell wraps.
  const http = (status) => `HTTP\u00a0${status}`;
  const status = row.last_status_code;
  if (!row.last_error) return status ? http(status) : '';
  const words = deliveryErrorShown(row.last_error);
  if (status) return [words, ` (${http(status)})`];
  return /^http_\dxx$/.test(row.last_error) ? [words, ` (${http(row.last_error.slice(5))})`] : words;
}

/**
 * When the worker tries again: only for a webhook row it has tried already. A pull buyer's pending
 * row also carries a next_attempt_at (its sale's time), but no worker sends it, even one with
 * webhook attempts from before its buyer switched to pull.
 */
const nextAttempt = (row) => (row.status === 'pending' && row.delivery_kind !== 'pull' && row.attempts > 0 && row.next_attempt_at ? time(row.next_attempt_at) : '');

/**
 * What a Send again re-opened, in words, from the service's answer rather than the row it was
 * pressed on, which may be older: the consumer erased since (the notice is what is sent again),
 * the buyer switched to pull since (the lead waits to be pulled, no worker sends it).
 */
function reopened(delivery) {
  const lead = delivery.lead_id;
  if (delivery.erased === true) return `The erasure notice of lead ${lead} is sent again: due ${time(delivery.notice_next_at)}. The lead itself is not: its personal data is erased.`;
  if (delivery.delivery_kind === 'pull') return `Lead ${lead} is pending again, for its buyer to pull and acknowledge: no worker sends it.`;
  return `Lead ${lead} is sent again: ${deliveryStatusWords(delivery.status).toLowerCase()}, due ${time(delivery.next_attempt_at)}.`;
}

const COLUMNS = [
  ['Lead', (r) => [h('a', { href: `#/leads/${r.lead_id}` }, r.lead_id), r.erased ? badge('erased') : null]],
  // A row is a buyer's or a bucket's, never both: one column, as on the leads page, so that the
  // table fits a laptop's width with a webhook row's error and next attempt.
  ['Buyer or bucket', (r) => r.buyer ?? r.bucket ?? '', 'name'],
  ['Delivery', (r) => r.delivery_kind ?? ''],
  ['Status', (r) => deliveryStatusShown(r.status)],
  ['Attempts', (r) => r.attempts, 'num'],
  ['Last attempt', (r) => time(r.last_attempt_at), 'time'],
  ['Last answer', lastAnswer, 'words'],
  ['Next attempt', nextAttempt, 'time'],
];

export async function renderDeliveries(main, _params, current, me) {
  const status = select('status', STATUSES, '');
  const message = h('p', { class: 'muted', role: 'status', 'aria-live': 'polite', id: 'deliveries-message' });
  const body = h('tbody');
  const more = h('button', { type: 'button', class: 'secondary', hidden: true }, 'More');
  const table = h(
    'table',
    { id: 'deliveries-table', 'aria-label': 'Deliveries' },
    h('thead', {}, h('tr', {}, COLUMNS.map(([t, , cls]) => h('th', { scope: 'col', class: cls }, t)))),
    body,
  );
  const form = h('form', { class: 'card filters', 'aria-label': 'Delivery filters' }, field('Status', status), h('button', { type: 'submit' }, 'Show'));
  const list = h('section', { class: 'card table-wrap results' }, table, h('p', { class: 'more' }, more));
  main.append(h('h1', {}, 'Deliveries'), form, message, list);
  // No table headings over nothing, before the first answer too (one that fails leaves none).
  hideEmpty(table);
  body.addEventListener('click', (event) => {
    const row = event.target.closest('tr[data-lead]');
    if (row && !event.target.closest('a, button')) location.hash = `#/leads/${row.dataset.lead}`;
  });

  /**
   * A row of the table; an admin's failed row has its Send again button in the Status cell, and an
   * erased lead's row whose lead.erased notice failed for good a Send notice again button.
   */
  function rowOf(row) {
    const tr = h('tr', { class: 'opens', 'data-lead': row.lead_id }, COLUMNS.map(([, cell, cls]) => h('td', { class: cls }, cell(row))));
    // Erased, the lead is never sent again: what the request re-opens is its notice, if that failed.
    const notice = row.erased === true;
    if (me?.role === 'admin' && (notice ? row.notice === 'failed' : row.status === 'failed')) {
      const label = notice ? `Send the erasure notice of lead ${row.lead_id} again` : `Send lead ${row.lead_id} again`;
      const button = h('button', { type: 'button', class: 'secondary', 'aria-label': label }, notice ? 'Send notice again' : 'Send again');
      // Once: a double-click sends it again once (oneAtATime).
      button.addEventListener('click', oneAtATime(button, () => sendAgain(row, button, notice)));
      tr.cells[COLUMNS.findIndex(([title]) => title === 'Status')].append(' ', button);
    }
    return tr;
  }

  async function sendAgain(row, button, notice) {
    const what = notice ? `The erasure notice of lead ${row.lead_id}` : `Lead ${row.lead_id}`;
    try {
      const answer = await postJson(`/functions/deliveries/${row.lead_id}/redeliver`);
      const tr = rowOf(answer.delivery);
      button.closest('tr').replaceWith(tr);
      cards(table);
      tr.querySelector('a').focus();
      say(message, reopened(answer.delivery));
    } catch (error) {
      say(message, `${what} was not sent again: ${explain(error)}`, 'error');
    }
  }

  let cursor = null;
  /** The status of the list shown ('' for any): a More asks for the next page of that list, whatever the form says now. */
  let asked = '';
  /** Counts the Shows: an answer to one that a later Show overtook is dropped, as is its failure. */
  let shows = 0;
  /** The Show whose list is on the page. */
  let listed = 0;
  const counted = () =>
    body.children.length === 0 ? `No ${asked ? `${deliveryStatusWords(asked).toLowerCase()} ` : ''}deliveries.` : `${things(body.children.length, 'delivery', 'deliveries')} shown.`;

  /**
   * The list: a new one (`reset`, for the status in the form) or the next page of the one shown. A
   * More while a Show is on its way asks nothing: the list it would add to is being replaced.
   */
  async function load(reset) {
    if (!reset && listed !== shows) return null;
    const mine = reset ? ++shows : shows;
    const wanted = reset ? status.value : asked;
    say(message, 'Loading…');
    const query = new URLSearchParams({ limit: '50', ...(wanted ? { status: wanted } : {}), ...(!reset && cursor ? { cursor } : {}) });
    // The rows shown stay until the answer comes: should none come (or a refusal), they are still
    // there, marked out of date (failed), rather than headings over an emptied table.
    const page = await getJson(`/functions/deliveries?${query}`).catch((error) => {
      if (mine === shows) throw error;
    });
    if (!current() || mine !== shows) return null;
    if (reset) {
      listed = mine;
      body.replaceChildren();
      asked = wanted;
      outOfDate(list, false);
    }
    let first = null;
    for (const row of page.items) {
      const tr = rowOf(row);
      first ??= tr;
      body.append(tr);
    }
    cards(table);
    hideEmpty(table);
    cursor = page.next_cursor;
    more.hidden = !cursor;
    say(message, counted());
    return first;
  }

  /**
   * A Show whose list did not come (no answer, 429, 5xx, a refusal): said in error style, and the
   * deliveries shown before kept and marked out of date.
   */
  function failed(error) {
    if (!current()) return;
    const n = body.children.length;
    say(message, `${explain(error)}${n === 0 ? '' : ` The ${n === 1 ? 'delivery' : `${n} deliveries`} below ${n === 1 ? 'is' : 'are'} from before, out of date.`}`, 'error');
    if (n > 0) outOfDate(list, true);
  }
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    load(true).catch(failed);
  });
  onMore(more, () => load(false), (error) => say(message, `${explain(error)} ${counted()}`, 'error'));
  await load(true).catch(failed);
}
