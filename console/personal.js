// The admin's page for a consumer's requests about its personal data. Find: the consumer's leads
// with their personal data and outcomes (POST /functions/consumers/lookup), a "right to know" answer.
// Erase: every lead of the consumer loses its personal data for good (POST /functions/erasures),
// after an explicit confirmation. Erasures: every request recorded for one, newest first
// (GET /functions/erasures), the record kept of consumers' requests. Look up: an erasure as
// recorded (GET /functions/erasures/{id}).
//
// The e-mail and mobile typed here are the consumer's personal data: they go to the service in
// the request only, never into the address bar, the tab's storage or the browser's form history,
// and the fields are emptied once the consumer is erased. Only the erasure id, which names no one,
// is put in the address (#/personal-data/erasures/{id}).

import { getJson, postJson, explain, latest, ApiError } from './api.js';
import { h, field, time, things, cards, onMore, oneAtATime, say, sayInvalid } from './dom.js';
import { codeShown, statusWords } from './words.js';

const LABELS = { email: 'E-mail', mobile: 'Mobile', suppress: 'Suppress later leads' };
/** Which contacts named an erasure's consumer, in words: "e-mail and mobile". */
const NAMED_BY = (fields) => fields.map((f) => (f === 'email' ? 'e-mail' : f)).join(' and ');

/**
 * A consumer's contact fields: not remembered by the browser, not spell-checked. Their forms are
 * not checked by the browser: the service normalises contacts as it does a posted lead's and its
 * answer names every field it refuses.
 */
function contactInputs() {
  const common = { autocomplete: 'off', spellcheck: 'false', autocapitalize: 'off' };
  return {
    email: h('input', { type: 'email', name: 'email', ...common }),
    mobile: h('input', { type: 'tel', name: 'mobile', ...common }),
  };
}

/** The typed contacts, trimmed; empty ones left out (the service asks for at least one). */
function contactsOf(inputs) {
  const contacts = {};
  for (const [name, input] of Object.entries(inputs)) if (input.value.trim() !== '') contacts[name] = input.value.trim();
  return contacts;
}

const unmark = (inputs) => Object.values(inputs).forEach((input) => input.removeAttribute('aria-invalid'));

/** The service's refusal, in words; the failing fields are marked on the form too. */
function refusal(error, inputs = {}) {
  unmark(inputs);
  if (!(error instanceof ApiError)) return explain(error);
  switch (error.status) {
    case 403:
      return 'This key may not do this: only an admin key may look up or erase a consumer\'s personal data.';
    case 404:
      return 'No erasure has this id.';
    case 422: {
      const errors = error.body.errors ?? [];
      for (const e of errors) inputs[e.field]?.setAttribute('aria-invalid', 'true');
      const fields = errors.map((e) => `${LABELS[e.field] ?? e.field} ${e.message}`).join('; ');
      return `Please check: ${fields || error.message}.`;
    }
    default:
      return explain(error);
  }
}

/**
 * The consumer's leads, a column each for what an access request answers. The names and contacts
 * (a supplier's or buyer's id up to 64 characters without a space, an e-mail, a consumer's name)
 * wrap in their cells (console.css), so that the table fits a laptop's window with every column,
 * the last one (whether the data is still held) in sight.
 */
const CONSUMER_COLUMNS = [
  ['Lead', (r) => h('a', { href: `#/leads/${r.lead_id}` }, r.lead_id)],
  ['Received', (r) => time(r.received_at), 'time'],
  ['Outcome', (r) => [statusWords(r.lead_status), r.code ? [', ', codeShown(r.code)] : null], 'words'],
  ['From', (r) => r.supplier ?? '', 'name'],
  ['To', (r) => r.buyer ?? r.bucket ?? '', 'name'],
  ['Name', (r) => [r.lead?.first_name, r.lead?.last_name].filter(Boolean).join(' '), 'name'],
  ['E-mail', (r) => r.lead?.email ?? '', 'name'],
  ['Mobile', (r) => r.lead?.mobile ?? ''],
  ['Personal data', (r) => (r.lead?.erased ? h('span', { class: 'no' }, 'erased') : r.lead ? 'held' : 'none recorded')],
];

function findSection() {
  const inputs = contactInputs();
  const message = h('p', { class: 'muted', role: 'status', 'aria-live': 'polite', id: 'consumer-message' });
  const body = h('tbody');
  const table = h(
    'table',
    { id: 'consumer-leads', 'aria-label': "The consumer's leads" },
    h('thead', {}, h('tr', {}, CONSUMER_COLUMNS.map(([t, , cls]) => h('th', { scope: 'col', class: cls }, t)))),
    body,
  );
  const results = h('div', { class: 'table-wrap results', hidden: true }, table);
  const form = h(
    'form',
    { class: 'filters', 'aria-labelledby': 'find-title', novalidate: true },
    h('h2', { id: 'find-title', class: 'wide' }, 'Find a consumer'),
    h('p', { class: 'muted wide' }, 'An access request: every lead of the consumer with this e-mail and/or mobile, with its personal data and outcome.'),
    field('E-mail', inputs.email),
    field('Mobile', inputs.mobile),
    h('button', { type: 'submit' }, 'Find'),
  );
  // Only the newest Find's consumer is listed: a Find withdraws the one before, whose answer,
  // should it come later, would list another consumer's leads (or the same ones twice) as this one's.
  const finds = latest();
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const signal = finds.next();
    message.className = 'muted';
    message.textContent = 'Looking…';
    body.replaceChildren();
    results.hidden = true;
    try {
      // In the body, never the URL: proxies and access logs in front of the service record URLs.
      const answer = await postJson('/functions/consumers/lookup', contactsOf(inputs), signal);
      if (signal.aborted) return;
      unmark(inputs);
      for (const row of answer.items) body.append(h('tr', { 'data-lead': row.lead_id }, CONSUMER_COLUMNS.map(([, cell, cls]) => h('td', { class: cls }, cell(row)))));
      cards(table);
      results.hidden = answer.items.length === 0;
      message.textContent = answer.items.length === 0 ? 'No lead of this consumer.' : `${answer.leads_found} lead(s) of this consumer.`;
    } catch (error) {
      if (signal.aborted) return;
      message.className = 'error';
      message.textContent = refusal(error, inputs);
    }
  });
  /** Forgets the consumer: the fields and the leads shown, and any Find still on its way. */
  const clear = () => {
    finds.stop();
    for (const input of Object.values(inputs)) input.value = '';
    body.replaceChildren();
    results.hidden = true;
    message.textContent = '';
  };
  return { section: h('section', { class: 'card' }, form, message, results), clear };
}

/** An erasure as recorded; its id links to its own address. */
function erasureRecord(erasure) {
  const items = [
    ['Status', erasure.status],
    ['Named by', NAMED_BY(erasure.fields)],
    ['Leads erased', String(erasure.leads_erased)],
    ['Lead ids', erasure.lead_ids.length === 0 ? '—' : erasure.lead_ids.map((id, i) => [i > 0 ? ', ' : '', h('a', { href: `#/leads/${id}` }, id)])],
    ['Later leads suppressed', erasure.suppressed ? 'yes' : 'no'],
    ['First erased', time(erasure.first_erased_at)],
    ['Last erased', time(erasure.last_erased_at)],
    ['As of (event log)', `commit ${erasure.as_of.commit}, prepare ${erasure.as_of.prepare}`],
  ];
  return h(
    'div',
    { class: 'erasure results', 'data-erasure': erasure.erasure_id },
    h('p', {}, 'Erasure ', h('a', { href: `#/personal-data/erasures/${erasure.erasure_id}`, class: 'id' }, erasure.erasure_id)),
    h('dl', { class: 'summary' }, items.map(([term, value]) => h('div', {}, h('dt', {}, term), h('dd', {}, value)))),
    h('h3', {}, 'Requests'),
    h(
      'ul',
      { class: 'requests' },
      (erasure.requests ?? []).map((r) => h('li', {}, `${time(r.erased_at)} by ${r.principal}: ${r.lead_ids.length} lead(s)${r.suppressed ? ', suppressed' : ''}.`)),
    ),
  );
}

function eraseSection(forget, erased) {
  const inputs = contactInputs();
  const suppress = h('input', { type: 'checkbox', name: 'suppress', id: 'erase-suppress' });
  const answer = h('div', { id: 'erase-answer', role: 'alert' });
  const confirmButton = h('button', { type: 'button', class: 'danger' }, 'Erase for good');
  const cancelButton = h('button', { type: 'button', class: 'secondary' }, 'Cancel');
  const consumerLine = h('p');
  const confirmation = h(
    'div',
    { class: 'confirm wide', id: 'erase-confirm', role: 'group', 'aria-labelledby': 'confirm-title', hidden: true },
    h('h3', { id: 'confirm-title' }, 'Erase this consumer? It cannot be undone.'),
    consumerLine,
    h('p', { class: 'actions' }, confirmButton, cancelButton),
  );
  const form = h(
    'form',
    { class: 'filters', 'aria-labelledby': 'erase-title', novalidate: true },
    h('h2', { id: 'erase-title', class: 'wide' }, 'Erase a consumer'),
    h(
      'p',
      { class: 'muted wide' },
      "Every lead of the consumer with this e-mail and/or mobile loses its personal data for good: outcomes and reports stay; a pending delivery is cancelled; a webhook buyer that received a lead is told to delete it.",
    ),
    field('E-mail', inputs.email),
    field('Mobile', inputs.mobile),
    h('div', { class: 'check' }, suppress, h('label', { for: suppress.id }, 'Suppress later leads (reject them SUPPRESSED)')),
    h('button', { type: 'submit' }, 'Erase…'),
    confirmation,
  );
  let asked = null;
  const cancel = () => {
    asked = null;
    confirmation.hidden = true;
    // The line names the consumer's contacts: hidden is not forgotten.
    consumerLine.textContent = '';
  };
  // Changing what was asked about withdraws the confirmation (what is confirmed is what is sent)
  // and the last refusal's marks.
  form.addEventListener('input', () => {
    cancel();
    unmark(inputs);
  });
  cancelButton.addEventListener('click', () => {
    cancel();
    inputs.email.focus();
  });
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const contacts = contactsOf(inputs);
    if (!contacts.email && !contacts.mobile) {
      // Nothing to confirm: the consumer is named by at least one contact.
      for (const input of Object.values(inputs)) input.setAttribute('aria-invalid', 'true');
      answer.replaceChildren(h('p', { class: 'error' }, "Type the consumer's e-mail and/or mobile first."));
      inputs.email.focus();
      return;
    }
    asked = { ...contacts, suppress: suppress.checked };
    const named = [asked.email ? `e-mail ${asked.email}` : null, asked.mobile ? `mobile ${asked.mobile}` : null].filter(Boolean).join(' and ');
    consumerLine.textContent = `Every lead of the consumer with ${named} loses its personal data for good${asked.suppress ? ', and later leads with these contacts are rejected' : ''}.`;
    answer.replaceChildren();
    confirmation.hidden = false;
    cancelButton.focus();
  });
  // One erasure a confirmation: a double-click sends it once (oneAtATime).
  confirmButton.addEventListener('click', oneAtATime(confirmButton, async () => {
    if (!asked) return;
    const body = asked;
    answer.replaceChildren(h('p', {}, 'Erasing…'));
    try {
      const reply = await postJson('/functions/erasures', body);
      unmark(inputs);
      cancel();
      // The consumer's contacts are no longer needed here: forget them, on both forms.
      for (const input of Object.values(inputs)) input.value = '';
      suppress.checked = false;
      forget();
      // The button pressed is hidden with its confirmation: the keyboard goes to the result, its heading.
      const done = h('h3', { id: 'erase-done', tabindex: '-1' }, 'Consumer erased');
      answer.replaceChildren(done, h('p', { class: 'ok' }, reply.message), erasureRecord(reply.erasure));
      done.focus();
      erased();
    } catch (error) {
      cancel();
      answer.replaceChildren(h('p', { class: 'error' }, refusal(error, inputs)));
    }
  }));
  return h('section', { class: 'card' }, form, answer);
}

// The erasure first: on a phone it heads the row's card, where its 32 characters fit on one line.
const ERASURE_COLUMNS = [
  ['Erasure', (r) => h('a', { href: `#/personal-data/erasures/${r.erasure_id}`, class: 'id' }, r.erasure_id)],
  ['Recorded', (r) => time(r.erased_at), 'time'],
  ['By', (r) => r.principal],
  ['Named by', (r) => NAMED_BY(r.fields)],
  ['Leads erased', (r) => String(r.leads_erased), 'num'],
  ['Suppressed', (r) => (r.suppressed ? 'yes' : 'no')],
];

/** The erasures' requests, newest first, a page at a time; `reload` after an erasure shows it. */
function erasuresSection(current) {
  const message = h('p', { class: 'muted', role: 'status', 'aria-live': 'polite', id: 'erasures-message' });
  const body = h('tbody');
  const more = h('button', { type: 'button', class: 'secondary', hidden: true }, 'More');
  const table = h(
    'table',
    { id: 'erasures-table', 'aria-label': 'Erasures' },
    h('thead', {}, h('tr', {}, ERASURE_COLUMNS.map(([t, , cls]) => h('th', { scope: 'col', class: cls }, t)))),
    body,
  );
  const results = h('div', { class: 'table-wrap results', hidden: true }, table, h('p', { class: 'more' }, more));
  let cursor = null;
  /** Counts the loads from the top (the page's, and after each erasure): an answer to one a later one overtook is dropped. */
  let loads = 0;
  /** The load whose list is on the page. */
  let listed = 0;
  /**
   * The list from the top (`reset`) or the next page of the one shown. A More while the list is
   * being loaded again asks nothing, and one answered after that is dropped: its page would follow
   * a list no longer shown.
   */
  async function load(reset) {
    if (!reset && listed !== loads) return null;
    const mine = reset ? ++loads : loads;
    const query = new URLSearchParams({ limit: '20', ...(!reset && cursor ? { cursor } : {}) });
    const page = await getJson(`/functions/erasures?${query}`).catch((error) => {
      if (mine === loads) throw error;
    });
    if (!current() || mine !== loads) return null;
    if (reset) {
      listed = mine;
      body.replaceChildren();
    }
    let first = null;
    for (const row of page.items) {
      const tr = h('tr', { 'data-erasure': row.erasure_id }, ERASURE_COLUMNS.map(([, cell, cls]) => h('td', { class: cls }, cell(row))));
      first ??= tr;
      body.append(tr);
    }
    cards(table);
    cursor = page.next_cursor;
    more.hidden = !cursor;
    results.hidden = body.children.length === 0;
    const n = body.children.length;
    say(message, n === 0 ? 'No erasure yet.' : `${things(n, 'request')} shown, the newest first.`);
    return first;
  }
  const fail = (error) => say(message, refusal(error), 'error');
  onMore(more, () => load(false), fail);
  const section = h(
    'section',
    { class: 'card', 'aria-labelledby': 'erasures-title' },
    h('h2', { id: 'erasures-title' }, 'Erasures'),
    h('p', { class: 'muted' }, 'Every request recorded for an erasure: when, by whom, which contacts named the consumer (never their values), and how many leads it erased.'),
    message,
    results,
  );
  return { section, reload: () => load(true).catch(fail) };
}

function lookupSection(id) {
  const input = h('input', { type: 'text', name: 'erasure_id', class: 'id', pattern: '[0-9a-f]{32}', required: true, autocomplete: 'off', spellcheck: 'false', value: id ?? '' });
  sayInvalid(input, (validity) => (validity.valueMissing ? 'Give an erasure id.' : 'An erasure id is 32 characters of 0 to 9 and a to f (lower case), as the erasure answered it.'));
  const answer = h('div', { id: 'erasure-found', role: 'status', 'aria-live': 'polite' });
  const form = h(
    'form',
    { class: 'filters', 'aria-labelledby': 'lookup-title' },
    h('h2', { id: 'lookup-title', class: 'wide' }, 'Look up an erasure'),
    field('Erasure id', input),
    h('button', { type: 'submit' }, 'Look up'),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    // The id names no one: it may go in the address, so the record can be opened again.
    location.hash = `#/personal-data/erasures/${input.value.trim()}`;
  });
  return { section: h('section', { class: 'card', id: 'erasure-lookup' }, form, answer), answer };
}

export async function renderPersonalData(main, [erasureId], current) {
  const find = findSection();
  const lookup = lookupSection(erasureId);
  const erasures = erasuresSection(current);
  // An erasure opened by its id comes first; otherwise looking one up is the last thing on the page.
  const sections = [find.section, eraseSection(find.clear, erasures.reload), erasures.section];
  if (erasureId) sections.unshift(lookup.section);
  else sections.push(lookup.section);
  main.append(
    h('h1', {}, 'Personal data'),
    h('p', { class: 'muted' }, "A consumer's requests about its personal data: to know what is held about it, and to have it erased."),
    ...sections,
  );
  const listed = erasures.reload();
  if (erasureId) {
    try {
      const { erasure } = await getJson(`/functions/erasures/${erasureId}`);
      if (current()) lookup.answer.replaceChildren(erasureRecord(erasure));
    } catch (error) {
      if (current()) lookup.answer.replaceChildren(h('p', { class: 'error' }, refusal(error)));
    }
  }
  await listed;
}
