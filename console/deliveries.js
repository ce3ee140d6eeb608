// Deliveries by status, newest first (GET /functions/deliveries). A row opens its lead's page:
// by click anywhere on the row, or by keyboard through the link in its first cell.

import { getJson, explain } from './api.js';
import { h, field, select, time } from './dom.js';

const STATUSES = [['', 'Any'], ['pending', 'Pending'], ['delivered', 'Delivered'], ['failed', 'Failed']];

export async function renderDeliveries(main, _params, current) {
  const status = select('status', STATUSES, '');
  const message = h('p', { class: 'muted', role: 'status', 'aria-live': 'polite' });
  const body = h('tbody');
  const more = h('button', { type: 'button', class: 'secondary', hidden: true }, 'More');
  const form = h('form', { class: 'card filters', 'aria-label': 'Delivery filters' }, field('Status', status), h('button', { type: 'submit' }, 'Show'));
  main.append(
    h('h1', {}, 'Deliveries'),
    form,
    message,
    h(
      'section',
      { class: 'card table-wrap' },
      h(
        'table',
        { id: 'deliveries-table', 'aria-label': 'Deliveries' },
        h('thead', {}, h('tr', {}, ['Lead', 'Buyer', 'Bucket', 'Status', 'Attempts', 'Last attempt', 'Last status'].map((t) => h('th', { scope: 'col', class: t === 'Attempts' ? 'num' : undefined }, t)))),
        body,
      ),
      h('p', {}, more),
    ),
  );
  body.addEventListener('click', (event) => {
    const row = event.target.closest('tr[data-lead]');
    if (row && !event.target.closest('a')) location.hash = `#/leads/${row.dataset.lead}`;
  });

  let cursor = null;
  async function load(reset) {
    if (reset) {
      cursor = null;
      body.replaceChildren();
    }
    message.textContent = 'Loading…';
    const query = new URLSearchParams({ limit: '50', ...(status.value ? { status: status.value } : {}), ...(cursor ? { cursor } : {}) });
    const page = await getJson(`/functions/deliveries?${query}`);
    if (!current()) return;
    for (const row of page.items) {
      body.append(
        h(
          'tr',
          { class: 'opens', 'data-lead': row.lead_id },
          h('td', {}, h('a', { href: `#/leads/${row.lead_id}` }, row.lead_id)),
          h('td', {}, row.buyer ?? ''),
          h('td', {}, row.bucket ?? ''),
          h('td', {}, row.status),
          h('td', { class: 'num' }, row.attempts),
          h('td', {}, time(row.last_attempt_at)),
          h('td', {}, row.last_status_code ?? ''),
        ),
      );
    }
    cursor = page.next_cursor;
    more.hidden = !cursor;
    message.textContent = body.children.length === 0 ? 'No deliveries.' : `${body.children.length} deliveries shown.`;
  }
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    load(true).catch((error) => (message.textContent = explain(error)));
  });
  more.addEventListener('click', () => load(false).catch((error) => (message.textContent = explain(error))));
  await load(true);
}
