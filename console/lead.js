// One lead: its outcome, then its timeline from GET /functions/leads/{id}/events — what was
// received, each check's result, every routing candidate with why it was or was not eligible,
// each delivery attempt, and the buyer's feedback. A lead posted with a ping has the ping's events
// first: what each buyer bid. For the buyer that bought it, the return form.

import { getJson, explain, ApiError } from './api.js';
import { h, money, time } from './dom.js';
import { openLeadForm } from './leads.js';
import { returnForm } from './buyer.js';

export async function renderLead(main, [id], current, me) {
  main.append(h('h1', {}, `Lead ${id}`), openLeadForm(id));

  let lead;
  let events;
  let pingEvents;
  try {
    [{ lead }, { items: events, ping_events: pingEvents }] = await Promise.all([getJson(`/functions/leads/${id}`), getJson(`/functions/leads/${id}/events`)]);
  } catch (error) {
    if (!current()) return;
    const missing = error instanceof ApiError && error.status === 404;
    main.append(h('p', { class: 'error', role: 'alert', id: 'lead-missing' }, missing ? `Lead ${id} not found: there is no such lead, or this key may not see it.` : explain(error)));
    return;
  }
  if (!current()) return;
  const mine = me.role === 'buyer' && lead.buyer === me.name;
  // Only the sections this key has: main.append would write a null as the text "null".
  const sections = [
    h('section', { class: 'card', 'aria-label': 'Outcome' }, summary(lead)),
    lead.lead ? consumer(lead.lead) : null,
    mine ? returnForm(lead, me) : null,
    h('section', { class: 'card' }, h('h2', {}, 'Timeline'), timeline([...(pingEvents ?? []).map((e) => ({ ...e, ping: true })), ...events])),
  ];
  main.append(...sections.filter(Boolean));
}

function summary(lead) {
  const where = lead.buyer ? `buyer ${lead.buyer}` : lead.bucket ? `bucket ${lead.bucket}` : '—';
  const items = [
    ['Status', lead.lead_status],
    ['Code', lead.code ?? '—'],
    ['Sold to', where],
    ['Revenue', `${money(lead.revenue)} ${lead.currency ?? ''}`],
    ['Supplier', lead.supplier],
    ['Source (sid / s1)', `${lead.sid ?? '—'} / ${lead.s1 ?? '—'}`],
    ['Received', time(lead.received_at)],
    ['Checks', lead.enrichment ? Object.entries(lead.enrichment).map(([k, v]) => `${k} ${v ?? '—'}`).join(', ') : '—'],
    ['Delivery', lead.delivery ? `${lead.delivery.status}, ${lead.delivery.attempts} attempt(s)` : '—'],
    ['Test lead', lead.test ? 'yes' : 'no'],
    ['Ping', lead.ping ? `${lead.ping.ping_id}${lead.ping.buyer ? `, sold at ${lead.ping.buyer}'s bid of ${money(lead.ping.bid)}` : ', no bid could take it'}` : '—'],
  ];
  // Only for those who may see the consumer: whether its personal data is still held.
  if (lead.lead) items.push(['Personal data', lead.lead.erased ? 'erased' : 'held']);
  return h('dl', { class: 'summary', id: 'lead-summary' }, items.map(([term, value]) => h('div', {}, h('dt', {}, term), h('dd', {}, value))));
}

/**
 * The consumer's details, for those the service gives them to (an admin, the lead's supplier, the
 * buyer that bought it); for anyone else the lead carries none and this card is not drawn.
 */
function consumer(person) {
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
    { class: 'card', 'aria-labelledby': 'consumer-title' },
    h('h2', { id: 'consumer-title' }, 'Consumer (personal data)'),
    h('dl', { class: 'summary', id: 'lead-consumer' }, items.map(([term, value]) => h('div', {}, h('dt', {}, term), h('dd', {}, value ?? '—')))),
  );
}

const yesNo = (ok) => h('span', { class: ok ? 'yes' : 'no' }, ok ? 'yes' : 'no');

/** What each event type says, as elements; an unknown type shows its data as JSON. */
const DETAILS = {
  LeadReceived: (d) => [
    h('p', {}, `From ${d.supplier}, sid ${d.sid ?? '—'}, s1 ${d.s1 ?? '—'}, state ${d.accident_state ?? '—'}${d.test ? ', test lead' : ''}.`),
    d.lead?.email ? h('p', { class: 'muted' }, `Consumer: ${d.lead.first_name} ${d.lead.last_name}, ${d.lead.email}, ${d.lead.mobile}`) : null,
    d.lead?.erased ? h('p', { class: 'muted' }, 'Consumer: personal data erased.') : null,
  ],
  LeadRejected: (d) => [h('p', {}, `Rejected: ${d.code}.`), h('ul', {}, (d.errors ?? []).map((e) => h('li', {}, `${e.field}: ${e.message}`)))],
  LeadEnriched: (d) =>
    h('ul', { class: 'checks' }, Object.entries(d.checks ?? {}).map(([name, c]) => h('li', { 'data-check': name }, `${name}: `, h('span', { class: c.result === 'pass' ? 'yes' : c.result === 'fail' ? 'no' : '' }, c.result), ` (${c.detail}, ${c.provider})`))),
  LeadRouted: (d) => [
    h('p', {}, `To ${d.target.kind} ${d.target.id} at ${money(d.price)} ${d.currency}, strategy ${d.strategy}, routing ${d.routing_version}.`),
    h(
      'div',
      { class: 'table-wrap' },
      h(
        'table',
        { class: 'candidates', 'aria-label': 'Routing candidates' },
        h('thead', {}, h('tr', {}, ['Buyer', 'Price', 'Eligible', 'Reason'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, (d.candidates ?? []).map((c) => h('tr', { 'data-buyer': c.buyer }, h('td', {}, c.buyer), h('td', { class: 'num' }, money(c.price)), h('td', {}, yesNo(c.eligible)), h('td', {}, c.detail ? `${c.reason} (${c.detail})` : c.reason)))),
      ),
    ),
  ],
  LeadSold: (d) => h('p', {}, `Sold to ${d.buyer} for ${money(d.revenue)} ${d.currency}.`),
  LeadPinged: (d) => h('p', {}, `Pinged by ${d.supplier}, sid ${d.sid}, state ${d.accident_state}; answer good until ${time(d.expires_at)}.`),
  PingBidsCollected: (d) => [
    h('p', {}, d.winner ? `Best bid: ${d.winner.buyer}, ${money(d.winner.amount)} ${d.currency}.` : 'No bid.'),
    h(
      'div',
      { class: 'table-wrap' },
      h(
        'table',
        { class: 'bids', 'aria-label': 'Bids' },
        h('thead', {}, h('tr', {}, ['Buyer', 'Answer', 'Bid', 'Latency'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, (d.bids ?? []).map((b) => h('tr', { 'data-buyer': b.buyer }, h('td', {}, b.buyer), h('td', {}, b.detail ? `${b.result} (${b.detail})` : b.result), h('td', { class: 'num' }, b.amount == null ? '—' : money(b.amount)), h('td', { class: 'num' }, b.latency_ms == null ? '—' : `${b.latency_ms} ms`)))),
      ),
    ),
  ],
  PingPosted: (d) => h('p', {}, `Posted as lead ${d.lead_id}${d.buyer ? `, sold at ${d.buyer}'s bid of ${money(d.amount)}` : ', no bid could take it'}.`),
  LeadPingMatched: (d) => h('p', {}, `Posted with ping ${d.ping_id}${d.buyer ? `: sold at ${d.buyer}'s bid of ${money(d.amount)}` : ': no bid could take it, routed as a plain post'}.`),
  LeadDeliveryAttempted: (d) => h('p', {}, `Attempt ${d.attempt} to ${d.buyer} (timeout ${d.timeout_ms} ms).`),
  LeadDelivered: (d) => h('p', {}, `Delivered to ${d.buyer} by ${d.via}, attempt ${d.attempt}${d.status ? `, HTTP ${d.status}` : ''}${d.latency_ms != null ? `, ${d.latency_ms} ms` : ''}.`),
  LeadDeliveryFailed: (d) => h('p', {}, `Attempt ${d.attempt} to ${d.buyer} failed: ${d.error}${d.status ? ` (HTTP ${d.status})` : ''}. ${d.next_attempt_at ? `Next attempt ${time(d.next_attempt_at)}.` : 'No more attempts.'}`),
  FeedbackRecorded: (d) => h('p', {}, `${d.buyer}: ${d.type}${d.reason ? ` (${d.reason})` : ''}.`),
  LeadPersonalDataErased: (d) => h('p', {}, `Personal data erased on the consumer's request (erasure ${d.erasure_id})${d.notify_buyer ? `; ${d.notify_buyer} is told to delete its copy` : ''}.`),
  LeadPersonalDataExpired: (d) => h('p', {}, `Personal data erased: older than the retention period (${d.retention_days} days).`),
  LeadDeliveryCancelled: (d) => h('p', {}, `Delivery to ${d.buyer ?? d.bucket} cancelled: personal data ${d.reason}.`),
  ErasureNoticeSent: (d) => h('p', {}, `Erasure notice delivered to ${d.buyer}, attempt ${d.attempt}, HTTP ${d.status}.`),
  ErasureNoticeFailed: (d) => h('p', {}, `Erasure notice to ${d.buyer} failed: ${d.error}. ${d.next_attempt_at ? `Next attempt ${time(d.next_attempt_at)}.` : 'No more attempts.'}`),
  LeadReturned: (d) => h('p', {}, `Returned by ${d.buyer} (${d.reason}): ${money(d.revenue)} ${d.currency} reversed.`),
};
const TONE = { LeadPersonalDataErased: 'bad', LeadPersonalDataExpired: 'bad', LeadRejected: 'bad', LeadDeliveryFailed: 'bad', LeadReturned: 'bad', LeadSold: 'good', LeadDelivered: 'good' };

function timeline(events) {
  return h(
    'ol',
    { class: 'timeline', id: 'timeline' },
    events.map((event) =>
      h(
        'li',
        { class: TONE[event.type], 'data-type': event.type },
        h('div', {}, h('span', { class: 'type' }, event.type), ' ', h('span', { class: 'when' }, `${event.ping ? 'ping ' : ''}#${event.revision} · ${time(event.occurred_at)}`)),
        (DETAILS[event.type] ?? ((d) => h('pre', {}, JSON.stringify(d, null, 2))))(event.data),
      ),
    ),
  );
}
