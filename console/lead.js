// One lead: its outcome, then its timeline from GET /functions/leads/{id}/events — what was
// received, each check's result, every routing candidate with why it was or was not eligible,
// each delivery attempt, and the buyer's feedback. A lead posted with a ping has the ping's events
// first: what each buyer bid. For the buyer that bought it, the return form (not on a test lead,
// which takes no feedback). Any id in the address has this page: one that is no lead id is not found.

import { getJson, ApiError } from './api.js';
import { h, money, withCurrency, time, things, say, badge, cards } from './dom.js';
import { openLeadForm } from './leads.js';
import { returnForm } from './buyer.js';
import { codeShown, statusWords, eventWords, deliveryStatusShown, feedbackShown, reasonWords, checkWords, checkResultWords, checkShown, deliveryErrorShown, candidateReasonShown, strategyShown, bidResultShown, bidDetailShown } from './words.js';

/** A lead id as the API takes one: 1 to 16 digits, no leading zero. */
const LEAD_ID = /^[1-9]\d{0,15}$/;

export async function renderLead(main, [raw], current, me) {
  let id = raw;
  try {
    id = decodeURIComponent(raw);
  } catch {
    // shown as typed
  }
  const valid = LEAD_ID.test(id);
  // The page's status line, as the lists have: a screen reader hears the lead being asked for, then
  // that it is shown or why it is not.
  const message = h('p', { class: 'muted', role: 'status', 'aria-live': 'polite', id: 'lead-message' });
  main.append(h('h1', { class: 'lead-title' }, `Lead ${id}`), openLeadForm(valid ? id : ''), message);
  const notFound = () => say(message, `Lead ${id} not found: there is no such lead, or this key may not see it.`, 'error');
  // Not a lead id the API could have (too long, not a number): not found, without asking.
  if (!valid) return notFound();

  say(message, `Loading lead ${id}…`);
  let lead;
  let events;
  let pingEvents;
  try {
    [{ lead }, { items: events, ping_events: pingEvents }] = await Promise.all([getJson(`/functions/leads/${id}`), getJson(`/functions/leads/${id}/events`)]);
  } catch (error) {
    if (!current()) return;
    if (error instanceof ApiError && error.status === 404) return notFound();
    // Anything else (too many requests, the service not ready) may pass: the shell says it, in an
    // alert, and offers to ask again; the line no longer says the lead is loading.
    message.remove();
    throw error;
  }
  if (!current()) return;
  const mine = me.role === 'buyer' && lead.buyer === me.name;
  // A lead is returned once: one returned already offers no form that could only be refused.
  const returned = mine ? (lead.feedback ?? []).find((f) => f.type === 'return' && f.buyer === me.name) : undefined;
  // Nor does one past the buyer's return window, counted from the sale as the service counts it
  // (by this browser's clock: within seconds of the window's end the service has the last word).
  const soldAt = events.find((e) => e.type === 'LeadSold')?.data.sold_at;
  const windowDays = me.buyer?.return_window_days;
  const closed = mine && !lead.test && !returned && soldAt && typeof windowDays === 'number' && Date.now() - Date.parse(soldAt) > windowDays * 86_400_000;
  // A buyer the routing file no longer names has no return reasons or window: the service refuses
  // its returns, so the page says so rather than offer a form with no reason to choose.
  const unrouted = mine && !lead.test && !returned && !me.buyer;
  // Only the sections this key has: main.append would write a null as the text "null".
  const sections = [
    h('section', { class: 'card results', 'aria-label': 'Outcome' }, summary(lead)),
    lead.lead ? consumer(lead) : null,
    mine && !lead.test && !returned && !closed && !unrouted ? returnForm(lead, me) : null,
    returned ? returnedNote(returned) : null,
    unrouted ? unroutedNote(me.name) : null,
    closed ? windowClosedNote(soldAt, windowDays) : null,
    mine && lead.test ? testLeadNote() : null,
    h('section', { class: 'card results' }, h('h2', {}, 'Timeline'), timeline([...(pingEvents ?? []).map((e) => ({ ...e, ping: true })), ...events], lead.currency)),
  ];
  main.append(...sections.filter(Boolean));
  const all = (pingEvents?.length ?? 0) + events.length;
  say(message, `Lead ${id} shown: ${statusWords(lead.lead_status).toLowerCase()}, ${things(all, 'event')} in its timeline.`);
}

/** Why a buyer is offered no return on a lead it returned already: when, and for what reason. */
function returnedNote(feedback) {
  return h(
    'section',
    { class: 'card', id: 'returned-note', 'aria-labelledby': 'returned-title' },
    h('h2', { id: 'returned-title' }, 'Returned'),
    h('p', {}, `You returned this lead on ${time(feedback.recorded_at)} (${reasonWords(feedback.reason)}): a lead can be returned once, and its revenue is reversed in the reports.`),
  );
}

/** Why a buyer is offered no return on a lead sold longer ago than its return window. */
function windowClosedNote(soldAt, days) {
  return h(
    'section',
    { class: 'card', id: 'window-closed-note', 'aria-labelledby': 'window-closed-title' },
    h('h2', { id: 'window-closed-title' }, 'Past the return window'),
    h('p', {}, `This lead was sold to you on ${time(soldAt)}: your return window is ${days} day${days === 1 ? '' : 's'} after the sale, so it can no longer be returned.`),
  );
}

/** Why a buyer is offered no return while the routing file does not name it: it has no reasons or window to return by. */
function unroutedNote(name) {
  return h(
    'section',
    { class: 'card', id: 'returns-unavailable-note', 'aria-labelledby': 'returns-unavailable-title' },
    h('h2', { id: 'returns-unavailable-title' }, 'Returns not possible now'),
    h('p', {}, `The routing in force no longer names ${name} as a buyer: your return reasons and window went with it, so the service takes no return from you for now.`),
  );
}

/** Why a buyer is offered no return on a test lead: the service takes no feedback on one. */
function testLeadNote() {
  return h(
    'section',
    { class: 'card', id: 'test-lead-note', 'aria-labelledby': 'test-lead-title' },
    h('h2', { id: 'test-lead-title' }, 'A test lead'),
    h('p', {}, 'This is a test lead: it cannot be returned and takes no feedback. Test leads are not delivered and are left out of reports.'),
  );
}

function summary(lead) {
  const where = lead.buyer ? `buyer ${lead.buyer}` : lead.bucket ? `bucket ${lead.bucket}` : '—';
  const items = [
    ['Status', statusWords(lead.lead_status)],
    ['Code', lead.code ? codeShown(lead.code) : '—'],
    ['Sold to', where],
    ['Revenue', money(lead.revenue, lead.currency)],
    ['Supplier', lead.supplier],
    ['Source (sid / s1)', `${lead.sid ?? '—'} / ${lead.s1 ?? '—'}`],
    ['Received', time(lead.received_at)],
    ['Checks', lead.enrichment ? checksInBrief(lead.enrichment) : '—'],
    ['Delivery', lead.test ? 'none: test leads are not delivered' : lead.delivery ? [deliveryStatusShown(lead.delivery.status), `, ${things(lead.delivery.attempts, 'attempt')}`] : '—'],
    ['Test lead', lead.test ? ['yes, left out of reports', badge('test')] : 'no'],
    ['Ping', lead.ping ? `${lead.ping.ping_id}${lead.ping.buyer ? `, sold at ${lead.ping.buyer}'s bid of ${money(lead.ping.bid, lead.currency)}` : ', no bid could take it'}` : '—'],
  ];
  // Whether its personal data is still held: the flag is for every reader, the fields only for some.
  if (lead.lead || lead.personal_data_erased) items.push(['Personal data', lead.personal_data_erased || lead.lead?.erased ? 'erased' : 'held']);
  return h('dl', { class: 'summary', id: 'lead-summary' }, items.map(([term, value]) => h('div', {}, h('dt', {}, term), h('dd', {}, value))));
}

/**
 * The consumer's details, for those the service gives them to (an admin, the lead's supplier, the
 * buyer that bought it); for anyone else the lead carries none and this card is not drawn. Once
 * erased, the card says so instead of showing empty fields.
 */
function consumer(lead) {
  const person = lead.lead;
  const title = h('h2', { id: 'consumer-title' }, 'Consumer (personal data)');
  if (lead.personal_data_erased || person.erased) {
    return h(
      'section',
      { class: 'card results', 'aria-labelledby': 'consumer-title' },
      title,
      h('div', { id: 'lead-consumer' }, h('p', { class: 'erased-note' }, 'Personal data erased'), h('p', { class: 'muted' }, 'The consumer\'s name, contacts and consent are gone for good; the timeline shows when and why.')),
    );
  }
  const items = [
    ['Name', [person.first_name, person.last_name].filter(Boolean).join(' ')],
    ['E-mail', person.email],
    ['Mobile', person.mobile],
    ['ZIP', person.zip4 ? `${person.zip}-${person.zip4}` : person.zip],
    ['Accident state', person.accident_state],
    ['Consent certificate', person.certificate_url],
  ];
  return h(
    'section',
    { class: 'card results', 'aria-labelledby': 'consumer-title' },
    title,
    h('dl', { class: 'summary', id: 'lead-consumer' }, items.map(([term, value]) => h('div', {}, h('dt', {}, term), h('dd', {}, value ?? '—')))),
  );
}

/** The lead view's check results in one line, "Phone: Passed; E-mail: Failed; Consent: Not known", each result as written its tooltip. */
const checksInBrief = (enrichment) =>
  Object.entries(enrichment).map(([name, result], i) => [
    i ? '; ' : '',
    `${checkWords(name)}: `,
    result ? h('span', { title: result, 'data-code': result }, checkResultWords(result)) : '—',
  ]);

const yesNo = (ok) => h('span', { class: ok ? 'yes' : 'no' }, ok ? 'yes' : 'no');

/** An attempt this service cut short as it stopped: not the buyer's failure, and not counted in its max_attempts. */
const cutShort = (d) => (d.interrupted ? ', cut short as the service stopped (not counted)' : '');

/** What each event type says, as elements; an unknown type shows its data as JSON. `currency`: the lead's, for amounts whose event names none. */

const DETAILS = {
  LeadReceived: (d) => [
    h('p', {}, `From ${d.supplier}, sid ${d.sid ?? '—'}, s1 ${d.s1 ?? '—'}, state ${d.accident_state ?? '—'}${d.test ? ', test lead' : ''}.`),
    d.lead?.email ? h('p', { class: 'muted' }, `Consumer: ${d.lead.first_name} ${d.lead.last_name}, ${d.lead.email}, ${d.lead.mobile}`) : null,
    d.lead?.erased ? h('p', { class: 'muted' }, 'Consumer: personal data erased.') : null,
  ],
  LeadRejected: (d) => [h('p', {}, 'Rejected: ', codeShown(d.code), '.'), h('ul', {}, (d.errors ?? []).map((e) => h('li', {}, `${e.field}: ${e.message}`)))],
  LeadEnriched: (d) =>
    h('ul', { class: 'checks' }, Object.entries(d.checks ?? {}).map(([name, c]) => h('li', { 'data-check': name }, `${checkWords(name)}: `, checkShown(c), c?.provider ? `, by ${c.provider}` : null))),
  LeadRouted: (d) => [
    h('p', {}, `To ${d.target.kind} ${d.target.id} at ${money(d.price, d.currency)}, chosen by `, strategyShown(d.strategy), `, routing ${d.routing_version}.`),
    h(
      'div',
      { class: 'table-wrap' },
      cards(h(
        'table',
        { class: 'candidates', 'aria-label': 'Routing candidates' },
        h('thead', {}, h('tr', {}, ['Buyer', withCurrency('Price', d.currency), 'Eligible', 'Reason'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, (d.candidates ?? []).map((c) => h('tr', { 'data-buyer': c.buyer }, h('td', {}, c.buyer), h('td', { class: 'num' }, money(c.price)), h('td', {}, yesNo(c.eligible)), h('td', {}, candidateReasonShown(c.reason), c.detail ? ` (${c.detail})` : null)))),
      )),
    ),
  ],
  LeadSold: (d) => h('p', {}, `Sold to ${d.buyer} for ${money(d.revenue, d.currency)}.`),
  LeadPinged: (d) => h('p', {}, `Pinged by ${d.supplier}, sid ${d.sid}, state ${d.accident_state}; answer good until ${time(d.expires_at)}.`),
  PingBidsCollected: (d) => [
    h('p', {}, d.winner ? `Best bid: ${d.winner.buyer}, ${money(d.winner.amount, d.currency)}.` : 'No bid.'),
    h(
      'div',
      { class: 'table-wrap' },
      cards(h(
        'table',
        { class: 'bids', 'aria-label': 'Bids' },
        h('thead', {}, h('tr', {}, ['Buyer', 'Answer', withCurrency('Bid', d.currency), 'Latency'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, (d.bids ?? []).map((b) => h('tr', { 'data-buyer': b.buyer }, h('td', {}, b.buyer), h('td', {}, bidResultShown(b.result), b.detail ? [' (', bidDetailShown(b.detail), ')'] : null), h('td', { class: 'num' }, b.amount == null ? '—' : money(b.amount)), h('td', { class: 'num' }, b.latency_ms == null ? '—' : `${b.latency_ms} ms`)))),
      )),
    ),
  ],
  PingPosted: (d, currency) => h('p', {}, `Posted as lead ${d.lead_id}${d.buyer ? `, sold at ${d.buyer}'s bid of ${money(d.amount, currency)}` : ', no bid could take it'}.`),
  LeadPingMatched: (d, currency) => h('p', {}, `Posted with ping ${d.ping_id}${d.buyer ? `: sold at ${d.buyer}'s bid of ${money(d.amount, currency)}` : ': no bid could take it, routed as a plain post'}.`),
  LeadDeliveryAttempted: (d) => h('p', {}, `Attempt ${d.attempt} to ${d.buyer} (timeout ${d.timeout_ms} ms).`),
  LeadDelivered: (d) => h('p', {}, `Delivered to ${d.buyer} by ${d.via}, attempt ${d.attempt}${d.status ? `, HTTP ${d.status}` : ''}${d.latency_ms != null ? `, ${d.latency_ms} ms` : ''}.`),
  LeadDeliveryFailed: (d) =>
    h('p', {}, `Attempt ${d.attempt} to ${d.buyer} failed: `, deliveryErrorShown(d.error), `${d.status ? ` (HTTP ${d.status})` : ''}${cutShort(d)}. ${d.next_attempt_at ? `Next attempt ${time(d.next_attempt_at)}.` : 'No more attempts.'}`),
  LeadRedeliveryRequested: (d) =>
    h('p', {}, `Sent again to ${d.buyer} (round ${d.round}, after ${d.attempts} attempt${d.attempts === 1 ? '' : 's'}), asked by ${d.requested_by?.name ?? d.requested_by?.role ?? 'an admin'}${d.reason ? ` (${d.reason})` : ''}.`),
  FeedbackRecorded: (d) => h('p', {}, `${d.buyer}: `, feedbackShown(d), '.'),
  LeadPersonalDataErased: (d) => h('p', {}, `Personal data erased on the consumer's request (erasure ${d.erasure_id})${d.notify_buyer ? `; ${d.notify_buyer} is told to delete its copy` : ''}.`),
  LeadPersonalDataExpired: (d) => h('p', {}, `Personal data erased: older than the retention period (${d.retention_days} days).`),
  LeadDeliveryCancelled: (d) =>
    h('p', {}, `Delivery to ${d.buyer ?? d.bucket} cancelled: ${d.reason === 'returned' ? `${d.buyer} returned the lead before it was delivered` : `personal data ${d.reason}`}.`),
  ErasureNoticeSent: (d) => h('p', {}, `Erasure notice delivered to ${d.buyer}, attempt ${d.attempt}, HTTP ${d.status}.`),
  ErasureNoticeFailed: (d) =>
    h('p', {}, `Erasure notice to ${d.buyer} failed: `, deliveryErrorShown(d.error), `${cutShort(d)}. ${d.next_attempt_at ? `Next attempt ${time(d.next_attempt_at)}.` : 'No more attempts.'}`),
  ErasureNoticeRedeliveryRequested: (d) =>
    h('p', {}, `Erasure notice sent again to ${d.buyer} (round ${d.round}, after ${d.attempts} attempt${d.attempts === 1 ? '' : 's'}), asked by ${d.requested_by?.name ?? d.requested_by?.role ?? 'an admin'}${d.reason ? ` (${d.reason})` : ''}.`),
  LeadReturned: (d) => h('p', {}, `Returned by ${d.buyer} (${reasonWords(d.reason)}): ${money(d.revenue, d.currency)} reversed.`),
};
// A failure is drawn in the failure colour whatever failed (a delivery or an erasure notice), a success in the success colour.
const TONE = {
  LeadPersonalDataErased: 'bad',
  LeadPersonalDataExpired: 'bad',
  LeadRejected: 'bad',
  LeadDeliveryFailed: 'bad',
  ErasureNoticeFailed: 'bad',
  LeadReturned: 'bad',
  LeadSold: 'good',
  LeadDelivered: 'good',
  ErasureNoticeSent: 'good',
};

function timeline(events, currency) {
  return h(
    'ol',
    { class: 'timeline', id: 'timeline' },
    events.map((event) =>
      h(
        'li',
        { class: TONE[event.type], 'data-type': event.type },
        // The event's type as the API writes it stays beside its words, for whoever reads the events route too.
        h('div', { class: 'code-words' }, h('span', { class: 'type', title: event.type }, eventWords(event)), ' ', h('code', { class: 'code' }, event.type), ' ', h('span', { class: 'when' }, `${event.ping ? 'ping ' : ''}#${event.revision} · ${time(event.occurred_at)}`)),
        (DETAILS[event.type] ?? ((d) => h('pre', {}, JSON.stringify(d, null, 2))))(event.data, currency),
      ),
    ),
  );
}
