// A buyer's pages. Pulls: the leads waiting for it (GET /functions/deliveries?status=pending), each
// with the consumer's details and an Acknowledge button (POST /functions/deliveries/{id}/ack).
// Bought: the leads it bought (GET /functions/leads), each opening the lead's page, where the
// return form is. The return form itself lives here: a select of the buyer's own return reasons
// (from GET /functions/me) and the service's answer in words.

import { getJson, postJson, explain, ApiError, pullsItsLeads } from './api.js';
import { h, field, select, say, time, things, onMore, oneAtATime, cards, hideEmpty } from './dom.js';
import { leadTable, leadCell } from './leads.js';
import { deliveryStatusShown, feedbackShown, reasonWords } from './words.js';

export async function renderPulls(main, _params, current, me) {
  main.append(h('h1', {}, 'Pending pulls'));
  if (!pullsItsLeads(me)) {
    main.append(h('p', { class: 'muted' }, 'Your leads are delivered to your webhook: there is nothing to pull here.'));
    return;
  }
  const message = h('p', { class: 'muted', role: 'status', 'aria-live': 'polite' });
  const body = h('tbody');
  const more = h('button', { type: 'button', class: 'secondary', hidden: true }, 'More');
  const table = h(
    'table',
    { id: 'pulls-table', 'aria-label': 'Pending pulls' },
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        [['Lead'], ['Sold', 'time'], ['Name', 'name'], ['E-mail', 'name'], ['Mobile'], ['ZIP'], ['State']].map(([t, cls]) => h('th', { scope: 'col', class: cls }, t)),
        // The buttons' column is named too, for a screen reader: out of sight, over its buttons.
        h('th', { scope: 'col', class: 'action' }, h('span', { class: 'unseen' }, 'Acknowledge')),
      ),
    ),
    body,
  );
  main.append(
    h('p', { class: 'muted' }, 'Leads sold to you and waiting to be taken. Acknowledge each once your system has it: it then counts as delivered.'),
    message,
    h('section', { class: 'card table-wrap results' }, table, h('p', { class: 'more' }, more)),
  );
  // No table headings over nothing, before the first answer too (one refused leaves none, only the refusal).
  hideEmpty(table);

  const status = () => {
    hideEmpty(table);
    say(message, body.children.length === 0 ? 'No pending pulls: no lead sold to you is waiting to be taken.' : `${things(body.children.length, 'pending pull')} shown.`);
  };
  /**
   * Takes a pull off the list. The focused button goes with its row: the keyboard moves on to the
   * next pull's button (or the one before, or the page), not back to the top of the document.
   */
  function drop(button) {
    const tr = button.closest('tr');
    const next = (tr.nextElementSibling ?? tr.previousElementSibling)?.querySelector('button') ?? button.closest('main');
    tr.remove();
    next.focus();
    status();
  }
  async function acknowledge(row, button) {
    try {
      const answer = await postJson(`/functions/deliveries/${row.lead_id}/ack`);
      drop(button);
      say(message, `Lead ${row.lead_id} acknowledged: delivered ${time(answer.delivery.delivered_at)}. ${message.textContent}`);
    } catch (error) {
      // Cancelled since the list was drawn (its consumer erased, the lead returned): no longer a
      // pull to take, and its personal data is to be dropped, so its row goes too.
      const cancelled = error instanceof ApiError && error.body?.code === 'DELIVERY_CANCELLED';
      if (cancelled) drop(button);
      say(message, `Lead ${row.lead_id} was not acknowledged: ${explain(error)}${cancelled ? ` ${message.textContent}` : ''}`, 'error');
    }
  }

  let cursor = null;
  async function load() {
    const query = new URLSearchParams({ status: 'pending', limit: '50', ...(cursor ? { cursor } : {}) });
    const page = await getJson(`/functions/deliveries?${query}`);
    if (!current()) return null;
    let first = null;
    for (const row of page.items) {
      const lead = row.lead ?? {};
      const button = h('button', { type: 'button', 'aria-label': `Acknowledge lead ${row.lead_id}` }, 'Acknowledge');
      // Once: a double-click acknowledges the lead once, not once and then "already" (oneAtATime).
      button.addEventListener('click', oneAtATime(button, () => acknowledge(row, button)));
      const tr = h(
        'tr',
        { 'data-lead': row.lead_id },
        h('td', {}, h('a', { href: `#/leads/${row.lead_id}` }, row.lead_id)),
        h('td', { class: 'time' }, time(row.created_at)),
        // A name or an e-mail as long as some are wraps in its cell rather than push the button out of sight.
        h('td', { class: 'name' }, [lead.first_name, lead.last_name].filter(Boolean).join(' ')),
        h('td', { class: 'name' }, lead.email ?? ''),
        h('td', {}, lead.mobile ?? ''),
        h('td', {}, lead.zip ?? ''),
        h('td', {}, lead.accident_state ?? ''),
        // The width of its card at a phone's width (console.css).
        h('td', { class: 'action' }, button),
      );
      first ??= tr;
      body.append(tr);
    }
    cards(table);
    cursor = page.next_cursor;
    more.hidden = !cursor;
    status();
    return first;
  }
  onMore(more, load, (error) => say(message, explain(error), 'error'));
  await load();
}

const BOUGHT_COLUMNS = [
  ['Lead', leadCell],
  ['Received', (r) => time(r.received_at), 'time'],
  // An erased lead keeps no name: said so, rather than an empty cell.
  ['Name', (r) => (r.personal_data_erased || r.lead?.erased ? h('span', { class: 'muted' }, 'Personal data erased') : [r.lead?.first_name, r.lead?.last_name].filter(Boolean).join(' ')), 'name'],
  ['State', (r) => r.lead?.accident_state ?? ''],
  ['Price', (r) => r.revenue, 'num money'],
  // A test lead is never delivered (nor returned): its view's "pending" would wait for ever.
  ['Delivery', (r) => (r.test ? 'none (test lead)' : r.delivery ? deliveryStatusShown(r.delivery.status) : '')],
  ['Feedback', (r) => (r.feedback ?? []).map((f, i) => [i ? ', ' : '', feedbackShown(f)]), 'words'],
];

export async function renderBought(main, _params, current) {
  const message = h('p', { class: 'muted', role: 'status', 'aria-live': 'polite', id: 'bought-message' });
  const more = h('button', { type: 'button', class: 'secondary', hidden: true }, 'More');
  const { table, body, add } = leadTable('bought-table', 'Bought leads', BOUGHT_COLUMNS);
  main.append(
    h('h1', {}, 'Bought leads'),
    h('p', { class: 'muted' }, 'The leads sold to you, newest first. Open one to see its timeline or to return it.'),
    message,
    h('section', { class: 'card table-wrap results' }, table, h('p', { class: 'more' }, more)),
  );
  // No table headings over nothing, before the first answer too (one refused leaves none, only the refusal).
  hideEmpty(table);
  let cursor = null;
  let tests = 0;
  async function load() {
    const query = new URLSearchParams({ limit: '50', ...(cursor ? { cursor } : {}) });
    const page = await getJson(`/functions/leads?${query}`);
    if (!current()) return null;
    const first = add(page.items);
    tests += page.items.filter((r) => r.test).length;
    cursor = page.next_cursor;
    more.hidden = !cursor;
    const n = body.children.length;
    say(
      message,
      n === 0
        ? 'No leads bought yet.'
        : `${things(n, 'lead')} shown.${tests === 0 ? '' : ` ${tests} of them ${tests === 1 ? 'is a test lead' : 'are test leads'}, marked "test": not delivered, not returnable, and left out of reports.`}`,
    );
    return first;
  }
  onMore(more, load, (error) => say(message, explain(error), 'error'));
  await load();
}

/** The service's refusal of a return, in words. */
function refusal(error, me) {
  if (!(error instanceof ApiError)) return explain(error);
  switch (error.body.code) {
    case 'ALREADY_RETURNED':
      return 'This lead has already been returned: a lead can be returned once.';
    case 'RETURN_WINDOW_CLOSED':
      return `This lead is past your return window (${me.buyer?.return_window_days ?? '?'} days after the sale): it can no longer be returned.`;
    case 'INVALID': {
      const fields = (error.body.errors ?? []).map((e) => e.message).join('; ');
      return `The return was refused: ${fields || error.message}`;
    }
    case 'NOT_FOUND':
      return 'This lead is not one you bought.';
    default:
      return explain(error);
  }
}

/** The return form for a lead the buyer bought; the timeline shows the return on the next visit. */
export function returnForm(lead, me) {
  const reasons = me.buyer?.return_reasons ?? [];
  const reason = select('reason', [['', 'Choose a reason…'], ...reasons.map((r) => [r, reasonWords(r)])], '');
  reason.required = true;
  // Focusable from script only: the keyboard is left on it once the form is done (below).
  const answer = h('p', { role: 'alert', id: 'return-answer', class: 'wide', tabindex: '-1' });
  const submit = h('button', { type: 'submit' }, 'Return');
  const form = h(
    'form',
    { class: 'card filters', id: 'return-form', 'aria-labelledby': 'return-title' },
    h('h2', { id: 'return-title', class: 'wide' }, 'Return this lead'),
    h('p', { class: 'muted wide' }, `Within ${me.buyer?.return_window_days ?? '?'} days of the sale, once, for one of your reasons. The sale's revenue is reversed in the reports.`),
    field('Reason', reason),
    submit,
    answer,
  );
  // One return at a time: a double-click (or Enter again) while the first is on its way sends
  // nothing more, rather than a second return the service can only refuse as already returned.
  const send = oneAtATime(submit, async () => {
    // The reason sent, whatever the list says by the time the answer comes.
    const chosen = reason.value;
    answer.className = 'wide';
    answer.textContent = 'Sending…';
    try {
      await postJson(`/functions/leads/${lead.lead_id}/feedback`, { type: 'return', reason: chosen });
      answer.className = 'wide ok';
      answer.textContent = `Returned (${reasonWords(chosen)}). The sale's revenue is reversed in the reports.`;
      // A lead is returned once: the form is done, rather than inviting a click the service can
      // only refuse as already returned.
      reason.disabled = true;
      submit.disabled = true;
      // The disabled control loses the keyboard: it goes to the answer, not back to the top of the document.
      answer.focus();
    } catch (error) {
      answer.className = 'wide error';
      answer.textContent = refusal(error, me);
    }
  });
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    send();
  });
  return form;
}
