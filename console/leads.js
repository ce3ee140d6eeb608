// Leads, newest first (GET /functions/leads): a supplier sees its own, an analyst or admin every
// lead. Filters by status, outcome code, source and received date; a row opens the lead's page.
// Below the filters, why leads were rejected: per rejection code over the date range, from the
// summary report (the same numbers as GET /functions/reports/summary), and per field over the
// rejected leads listed, from each lead's errors. Test leads are listed, each marked "test"; the
// report leaves them out, and so do both breakdowns.

import { getAll, getJson, explain, ApiError } from './api.js';
import { h, field, select, say, sayInvalid, count, money, withCurrency, currencyOf, time, badge, onMore, cards, hideEmpty, outOfDate } from './dom.js';
import { OUTCOME_CODES, REJECTION_CODES, codeWords, codeMeaning, codeShown, statusWords } from './words.js';

const STATUSES = [['', 'Any'], ...['sold', 'unsold', 'rejected', 'received'].map((s) => [s, statusWords(s)])];
// The code filter offers every outcome code, in words (words.js) with the code beside them, as the
// API and the CSV write it (an option holds text only); the value sent is the code.
const CODES = [['', 'Any'], ...Object.keys(OUTCOME_CODES).map((c) => [c, `${codeWords(c)} (${c})`])];

/** The breakdowns' column headings: what a row counts by, then how many rejected leads (the table's name says rejected). */
const headings = (by) => h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, by), h('th', { scope: 'col', class: 'num' }, 'Leads')));

const utcDay = (date) => date.toISOString().slice(0, 10);
const nextDay = (day) => utcDay(new Date(Date.parse(`${day}T00:00:00Z`) + 86_400_000));

/** The lead-id form: open any lead this key may see by its id. */
export function openLeadForm(id = '') {
  const input = h('input', { type: 'text', name: 'lead_id', inputmode: 'numeric', pattern: '[1-9][0-9]{0,15}', required: true, value: id });
  sayInvalid(input, (validity) => (validity.valueMissing ? 'Give a lead id.' : 'A lead id is a number, such as 1042.'));
  const form = h('form', { class: 'card filters', 'aria-label': 'Open a lead' }, field('Lead id', input), h('button', { type: 'submit' }, 'Open'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    location.hash = `#/leads/${input.value.trim()}`;
  });
  return form;
}

/** A lead row's first cell: the link to the lead, and what kind of lead it is, in words. */
export const leadCell = (r) => [
  h('a', { href: `#/leads/${r.lead_id}` }, r.lead_id),
  r.test ? badge('test') : null,
  r.personal_data_erased ? badge('erased') : null,
];

/**
 * A table of lead views whose rows open the lead's page; `columns` are [heading, cell(row), class].
 * A money column (class 'num money', cell giving the amount) is headed with the rows' currency, or,
 * should the rows have several, shows each amount's own. `add` returns the first row it added.
 */
export function leadTable(id, label, columns) {
  const body = h('tbody');
  const heads = columns.map(([t, , cls]) => h('th', { scope: 'col', class: cls }, t));
  const table = h('table', { id, 'aria-label': label }, h('thead', {}, h('tr', {}, heads)), body);
  body.addEventListener('click', (event) => {
    const row = event.target.closest('tr[data-lead]');
    if (row && !event.target.closest('a, button, select, input')) location.hash = `#/leads/${row.dataset.lead}`;
  });
  const shown = [];
  const cells = [];
  const add = (rows) => {
    let first = null;
    for (const row of rows) {
      const tr = h('tr', { class: `opens${row.test ? ' test' : ''}`, 'data-lead': row.lead_id }, columns.map(([, cell, cls]) => h('td', { class: cls }, cls?.includes('money') ? '' : cell(row))));
      shown.push(row);
      cells.push(tr);
      first ??= tr;
      body.append(tr);
    }
    const currency = currencyOf(shown);
    columns.forEach(([t, cell, cls], i) => {
      if (!cls?.includes('money')) return;
      heads[i].textContent = withCurrency(t, currency);
      shown.forEach((row, r) => (cells[r].children[i].textContent = money(cell(row), currency ? null : row.currency)));
    });
    cards(table);
    hideEmpty(table);
    return first;
  };
  const clear = () => {
    shown.length = 0;
    cells.length = 0;
    body.replaceChildren();
    hideEmpty(table);
  };
  return { table, body, add, clear };
}

const LEAD_COLUMNS = [
  ['Lead', leadCell],
  ['Received', (r) => time(r.received_at), 'time'],
  ['Status', (r) => statusWords(r.lead_status)],
  ['Code', (r) => codeShown(r.code)],
  // A sid is up to 64 characters without a space: a name, which wraps rather than widen the table.
  ['Source', (r) => r.sid ?? '', 'name source'],
  ['Buyer or bucket', (r) => r.buyer ?? r.bucket ?? '', 'name'],
  ['Revenue', (r) => r.revenue, 'num money'],
  // A lead may fail on many fields: the list wraps at its commas rather than run out of the table's box.
  ['Failing fields', (r) => (r.errors ?? []).map((e) => e.field).join(', '), 'words'],
];

export async function renderLeads(main, _params, current, me) {
  const today = utcDay(new Date());
  const from = h('input', { type: 'date', name: 'from', required: true, value: utcDay(new Date(Date.now() - 6 * 86_400_000)) });
  const to = h('input', { type: 'date', name: 'to', required: true, value: today });
  const status = select('status', STATUSES, '');
  const code = select('code', CODES, '');
  const sid = h('input', { type: 'text', name: 'sid', pattern: '[A-Za-z0-9._\\-]{1,64}', autocomplete: 'off' });
  sayInvalid(sid, () => 'A source (sid) is 1 to 64 letters, digits, dots, underscores or hyphens, with no space.');
  const message = h('p', { class: 'muted', role: 'status', 'aria-live': 'polite', id: 'leads-message' });
  const more = h('button', { type: 'button', class: 'secondary', hidden: true }, 'More');
  const form = h(
    'form',
    { class: 'card filters', 'aria-label': 'Lead filters' },
    field('From (UTC)', from),
    field('To (UTC)', to),
    field('Status', status),
    field('Code', code),
    field('Source (sid)', sid),
    h('button', { type: 'submit' }, 'Show'),
  );
  const byCode = h('div', { id: 'rejections-by-code' });
  const byField = h('div', { id: 'rejections-by-field' });
  const { table, add, clear } = leadTable('leads-table', 'Leads', LEAD_COLUMNS);
  const list = h('section', { class: 'card table-wrap results' }, table, h('p', { class: 'more' }, more));
  main.append(
    h('h1', {}, me.role === 'supplier' ? 'Your leads' : 'Leads'),
    form,
    h(
      'section',
      { class: 'card results', 'aria-labelledby': 'why-title' },
      h('h2', { id: 'why-title' }, 'Why leads were rejected'),
      h('div', { class: 'why' }, byCode, byField),
    ),
    message,
    list,
    openLeadForm(),
  );
  // No table headings over nothing, before the first answer too (one that fails leaves none).
  hideEmpty(table);

  let cursor = null;
  let shown = [];
  /** The filters of the list shown (a More asks for the next page of that list, whatever the form says now). */
  let asked = null;
  /** What the filters of the list shown were, in words for its status line. */
  let listWords = null;
  /** Counts the Shows: an answer to one that a later Show overtook is dropped, as is its failure. */
  let shows = 0;
  /** The Show whose list is on the page. */
  let listed = 0;

  /**
   * The list: a new one (`reset`, for the filters in the form) or the next page of the one shown. A
   * More while a Show is on its way asks nothing: the list it would add to is being replaced.
   */
  async function load(reset) {
    if (!reset && listed !== shows) return null;
    const mine = reset ? ++shows : shows;
    const filters = reset
      ? {
          since: `${from.value}T00:00:00Z`,
          until: `${nextDay(to.value)}T00:00:00Z`,
          ...(status.value ? { status: status.value } : {}),
          ...(code.value ? { code: code.value } : {}),
          ...(sid.value.trim() ? { sid: sid.value.trim() } : {}),
        }
      : asked;
    const words = { from: from.value, to: to.value, filtered: Boolean(status.value || code.value || sid.value.trim()) };
    say(message, 'Loading…');
    const query = new URLSearchParams({ limit: '50', ...filters, ...(!reset && cursor ? { cursor } : {}) });
    // The rows shown stay until the answer comes: should none come (or a refusal), they are still
    // there, marked out of date (failed), rather than a page emptied under the error.
    const page = await getJson(`/functions/leads?${query}`).catch((error) => {
      if (mine === shows) throw error;
    });
    if (!current() || mine !== shows) return null;
    if (reset) {
      listed = mine;
      shown = [];
      clear();
      asked = filters;
      listWords = words;
      outOfDate(list, false);
      outOfDate(byField, false);
    }
    const first = add(page.items);
    shown.push(...page.items);
    cursor = page.next_cursor;
    more.hidden = !cursor;
    say(message, counted());
    showFields();
    return first;
  }

  /** The list's status line: how many leads are shown, and of them how many are test leads. */
  function counted() {
    const n = shown.length;
    const tests = shown.filter((lead) => lead.test).length;
    return n === 0
      ? `No leads from ${listWords.from} to ${listWords.to} (UTC)${listWords.filtered ? ' with these filters' : ''}.`
      : `${n} lead${n === 1 ? '' : 's'} shown${cursor ? ' (more with the button below the table)' : ''}.${
          tests === 0 ? '' : ` ${tests} of them ${tests === 1 ? 'is a test lead' : 'are test leads'}, marked "test": the report and the breakdowns above leave test leads out.`
        }`;
  }

  /**
   * A Show whose list did not come (no answer, 429, 5xx, a refusal): said in error style, and the
   * leads shown before, with the per-field card that counts them, kept and marked out of date.
   */
  function listFailed(error) {
    const kept = shown.length === 0 ? '' : ` The ${shown.length === 1 ? 'lead' : `${shown.length} leads`} below ${shown.length === 1 ? 'is' : 'are'} from before, out of date.`;
    say(message, `${explain(error)}${kept}`, 'error');
    if (shown.length === 0) return;
    outOfDate(list, true);
    outOfDate(byField, true);
  }

  /** Per field, how many of the rejected leads shown failed on it (test leads left out, as in the report). */
  function showFields() {
    const rejected = shown.filter((lead) => lead.lead_status === 'rejected' && !lead.test);
    const fields = new Map();
    for (const lead of rejected) for (const name of new Set((lead.errors ?? []).map((e) => e.field))) fields.set(name, (fields.get(name) ?? 0) + 1);
    const rows = [...fields].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    byField.replaceChildren(
      h('h3', {}, 'By field'),
      h('p', { class: 'muted' }, `Counts the ${count(rejected.length)} rejected leads shown in the table below, test leads left out (a lead counts once per field it failed on).`),
      rows.length === 0
        ? h('p', { class: 'muted' }, 'No failing fields among the leads shown.')
        : h(
            'table',
            { 'aria-label': 'Rejected leads by field' },
            headings('Field'),
            h('tbody', {}, rows.map(([name, n]) => h('tr', { 'data-field': name }, h('th', { scope: 'row' }, name), h('td', { class: 'num' }, count(n))))),
          ),
    );
  }

  /**
   * Per rejection code over the date range, from the report (UTC days, every source and status,
   * test leads left out: the Source and Status filters do not apply, and the card says so): a row per
   * code with any, which add up to the report's `rejected`. A rejected_<CODE> column the console
   * does not know yet is shown too, under its code.
   */
  async function loadCodes() {
    const mine = shows;
    const dates = { from: from.value, to: to.value };
    let report;
    try {
      report = await getAll('/functions/reports/summary', { ...dates, tz: 'UTC', group_by: 'day' });
    } catch (error) {
      if (current() && mine === shows) codesFailed(error, dates);
      return;
    }
    if (!current() || mine !== shows) return;
    outOfDate(byCode, false);
    const columns = new Set(REJECTION_CODES.map((c) => `rejected_${c}`));
    for (const row of report.items) for (const name of Object.keys(row)) if (/^rejected_[A-Z_]+$/.test(name)) columns.add(name);
    const sums = Object.fromEntries(['rejected', ...columns].map((name) => [name, report.items.reduce((s, row) => s + (row[name] ?? 0), 0)]));
    const rows = [...columns].filter((name) => sums[name] > 0).map((name) => name.slice('rejected_'.length));
    // The report's rejected is the sum of its rejected_* columns; should it ever not be, the
    // difference shows as a row of its own rather than a total the rows do not add up to.
    const other = sums.rejected - rows.reduce((s, c) => s + sums[`rejected_${c}`], 0);
    byCode.replaceChildren(
      h('h3', {}, 'By code'),
      h(
        'p',
        { class: 'muted' },
        `Every lead rejected from ${from.value} to ${to.value} (UTC), from the report: ${count(sums.rejected)} in all. Over the dates, all sources and statuses; test leads left out.`,
      ),
      rows.length === 0 && other === 0
        ? h('p', { class: 'muted' }, 'No lead was rejected in these days.')
        : h(
            'table',
            { 'aria-label': 'Rejected leads by code' },
            headings('Code'),
            h(
              'tbody',
              {},
              rows.map((c) =>
                h('tr', { 'data-code': c }, h('th', { scope: 'row' }, codeShown(c), codeMeaning(c) ? h('span', { class: 'muted meaning' }, codeMeaning(c)) : null), h('td', { class: 'num' }, count(sums[`rejected_${c}`]))),
              ),
              other !== 0 ? h('tr', { 'data-code': 'other' }, h('th', { scope: 'row' }, 'Other codes'), h('td', { class: 'num' }, count(other))) : null,
            ),
            h('tfoot', {}, h('tr', {}, h('th', { scope: 'row' }, 'Total'), h('td', { class: 'num' }, count(sums.rejected)))),
          ),
    );
    byCode.dataset.totals = JSON.stringify(sums);
  }

  /**
   * The report behind "By code" did not come. Refused for these dates (422: a range longer than a
   * report takes, while the list takes any): the card says it cannot be shown for them, in error
   * style, rather than keep another range's counts. Not answered for now (no answer, 429, 5xx):
   * its last counts stay, marked out of date, under the reason.
   */
  function codesFailed(error, dates) {
    const refused = error instanceof ApiError && error.status === 422;
    const reason = refused ? (error.body.errors ?? []).map((e) => e.message).join('; ') || error.message : explain(error);
    const note = h('p', { class: 'error', id: 'rejections-by-code-error' }, refused ? `Cannot be shown for ${dates.from} to ${dates.to} (UTC): ${reason}.` : reason);
    if (refused || !byCode.dataset.totals) {
      delete byCode.dataset.totals;
      outOfDate(byCode, false);
      byCode.replaceChildren(h('h3', {}, 'By code'), note);
      return;
    }
    byCode.querySelector('#rejections-by-code-error')?.remove();
    byCode.querySelector('h3').after(note);
    outOfDate(byCode, true);
  }

  // The list and the report are asked together, and each says for itself how it went: the status
  // line is the list's, the "By code" card the report's.
  const run = () => Promise.all([load(true).catch((error) => current() && listFailed(error)), loadCodes()]);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    run();
  });
  onMore(more, () => load(false), (error) => say(message, `${explain(error)} ${counted()}`, 'error'));
  await run();
}
