// The summary report for analysts and admins: by day as a time series, by a chosen dimension as
// bars and a table, and the same rows as CSV. Every number comes from
// GET /functions/reports/summary; the charts hold exactly what the API answered.

import { getAll, getCsv, explain } from './api.js';
import { h, field, select, count, money, rate } from './dom.js';

const DIMENSIONS = [['sid', 'Source (sid)'], ['s1', 'Click id (s1)'], ['state', 'State'], ['buyer', 'Buyer'], ['supplier', 'Supplier']];
const COUNTS = ['received', 'accepted', 'sold', 'unsold', 'rejected', 'returned'];
const MONEY = ['revenue', 'net_revenue'];
const BAR_LIMIT = 20;

const localDay = (tz, date = new Date()) => new Intl.DateTimeFormat('en-CA', { timeZone: tz, year: 'numeric', month: '2-digit', day: '2-digit' }).format(date);

function timeZones(...current) {
  const zones = typeof Intl.supportedValuesOf === 'function' ? Intl.supportedValuesOf('timeZone') : [];
  return [...new Set(['UTC', ...current, ...zones])].map((zone) => [zone, zone]);
}

/** A time zone the browser knows, as the service will (both take IANA names). */
function knownZone(tz) {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

/** Sums of the counters and money of some rows, money to the cent. */
function totals(rows, fields = [...COUNTS, ...MONEY]) {
  const sum = {};
  for (const name of fields) sum[name] = rows.reduce((s, row) => s + (typeof row[name] === 'number' ? row[name] : 0), 0);
  for (const name of MONEY) if (name in sum) sum[name] = Math.round(sum[name] * 100) / 100;
  return sum;
}

let charts = [];

const DAY = /^\d{4}-\d{2}-\d{2}$/;

/**
 * The report's query from the hash (#/report?from=…), each value kept only if the form can show it;
 * what is missing or unusable takes the form's default: the last seven days in the browser's zone.
 */
function asked(search, zone) {
  const query = new URLSearchParams(search ?? '');
  const tz = query.get('tz');
  const dimension = query.get('group_by');
  return {
    from: DAY.test(query.get('from') ?? '') ? query.get('from') : localDay(zone, new Date(Date.now() - 6 * 86_400_000)),
    to: DAY.test(query.get('to') ?? '') ? query.get('to') : localDay(zone),
    tz: tz && knownZone(tz) ? tz : zone,
    groupBy: DIMENSIONS.some(([v]) => v === dimension) ? dimension : 'sid',
  };
}

export async function renderReport(main, [search], current) {
  for (const chart of charts) chart.destroy();
  charts = [];
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
  const initial = asked(search, zone);
  // Asked for before the page is built (the time-zone list alone is some 400 options): these two
  // answers are what the first chart waits for.
  const first = fetchReport(initial);
  first.catch(() => {}); // handled where it is awaited, in show()
  const to = h('input', { type: 'date', name: 'to', required: true, value: initial.to });
  const from = h('input', { type: 'date', name: 'from', required: true, value: initial.from });
  const tz = select('tz', timeZones(zone, initial.tz), initial.tz);
  const groupBy = select('group_by', DIMENSIONS, initial.groupBy);
  const csvButton = h('button', { type: 'button', class: 'secondary' }, 'Download CSV');
  const status = h('p', { class: 'muted', role: 'status', 'aria-live': 'polite' });
  const form = h(
    'form',
    { class: 'card filters', 'aria-label': 'Report filters' },
    field('From', from),
    field('To', to),
    field('Time zone', tz),
    field('Group by', groupBy),
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Show'), csvButton),
  );
  const daily = h('canvas', { role: 'img', 'aria-label': 'Received, accepted, sold and revenue by day' });
  const bars = h('canvas', { role: 'img', 'aria-label': 'Received and sold by the chosen dimension' });
  const dailyBox = h('div', { class: 'chart', id: 'chart-daily' }, daily);
  const barsBox = h('div', { class: 'chart', id: 'chart-groups' }, bars);
  const barsTitle = h('h2', {}, 'By source');
  const tableBox = h('div', { class: 'table-wrap' });
  main.append(
    h('h1', {}, 'Report'),
    form,
    status,
    h('div', { class: 'charts' }, h('section', { class: 'card' }, h('h2', {}, 'By day'), dailyBox), h('section', { class: 'card' }, barsTitle, barsBox)),
    h('section', { class: 'card' }, h('h2', { id: 'table-title' }, 'Rows'), tableBox),
  );

  const query = () => ({ from: from.value, to: to.value, tz: tz.value });
  const dimensionName = () => DIMENSIONS.find(([v]) => v === groupBy.value)[1];

  async function show(answer = fetchReport({ ...query(), groupBy: groupBy.value })) {
    status.textContent = 'Loading…';
    const dimension = groupBy.value;
    const [days, groups] = await answer;
    if (!current()) return;
    for (const chart of charts) chart.destroy();
    charts = [dailyChart(daily, everyDay(days.head.from, days.head.to, days.items)), groupChart(bars, groups.items, dimension)];
    dailyBox.dataset.totals = JSON.stringify(chartTotals(charts[0]));
    barsBox.dataset.totals = JSON.stringify(chartTotals(charts[1]));
    barsTitle.textContent = `By ${dimensionName().toLowerCase()}${groups.items.length > BAR_LIMIT ? ` (top ${BAR_LIMIT} by received)` : ''}`;
    tableBox.replaceChildren(table(groups.items, dimension));
    if (!performance.getEntriesByName('leadpost:first-chart').length) performance.mark('leadpost:first-chart');
    status.textContent = `${groups.items.length} rows${groups.truncated ? ' (first 10,000 shown; the CSV has every row)' : ''}, ${days.head.from} to ${days.head.to} in ${days.head.tz}.`;
  }

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    // The address names the report shown, to bookmark or send; replaced, so no page change follows.
    history.replaceState(null, '', `#/report?${new URLSearchParams({ ...query(), group_by: groupBy.value })}`);
    show().catch((error) => (status.textContent = explain(error)));
  });
  csvButton.addEventListener('click', async () => {
    try {
      const { blob, name } = await getCsv(`/functions/reports/summary?${new URLSearchParams({ ...query(), group_by: groupBy.value })}`);
      const link = h('a', { href: URL.createObjectURL(blob), download: name });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
    } catch (error) {
      status.textContent = explain(error);
    }
  });
  await show(first).catch((error) => (status.textContent = explain(error)));
}

/** The two reports a page shows: by day for the time series, by the chosen grouping for the bars and table. */
function fetchReport({ from, to, tz, groupBy }) {
  return Promise.all([
    getAll('/functions/reports/summary', { from, to, tz, group_by: 'day' }),
    getAll('/functions/reports/summary', { from, to, tz, group_by: groupBy }),
  ]);
}

/** One row per day of the range, a day without leads as zeros, so the time axis has no gaps. */
function everyDay(from, to, rows) {
  const byDay = new Map(rows.map((row) => [row.day, row]));
  const days = [];
  for (let t = Date.parse(`${from}T00:00:00Z`); t <= Date.parse(`${to}T00:00:00Z`); t += 86_400_000) {
    const day = new Date(t).toISOString().slice(0, 10);
    days.push(byDay.get(day) ?? { day });
  }
  return days;
}

/** What a chart holds, summed per dataset: read from the chart itself, so tests see what it draws. */
function chartTotals(chart) {
  const sums = {};
  for (const dataset of chart.data.datasets) sums[dataset.key] = Math.round(dataset.data.reduce((s, v) => s + (v ?? 0), 0) * 100) / 100;
  return sums;
}

const COLORS = { received: '#1f5fbf', accepted: '#7b5cc4', sold: '#1b7a3a', revenue: '#c77700' };

function dailyChart(canvas, rows) {
  const dataset = (key, label, extra = {}) => ({ key, label, data: rows.map((r) => r[key] ?? 0), borderColor: COLORS[key], backgroundColor: COLORS[key], ...extra });
  return new Chart(canvas, {
    type: 'line',
    data: {
      labels: rows.map((r) => r.day),
      datasets: [
        dataset('received', 'Received'),
        dataset('accepted', 'Accepted'),
        dataset('sold', 'Sold'),
        dataset('revenue', 'Revenue', { type: 'bar', yAxisID: 'money', backgroundColor: 'rgba(199, 119, 0, 0.35)', order: 2 }),
      ],
    },
    options: {
      animation: false,
      maintainAspectRatio: false,
      interaction: { mode: 'index', intersect: false },
      scales: {
        y: { beginAtZero: true, title: { display: true, text: 'Leads' }, ticks: { precision: 0 } },
        money: { beginAtZero: true, position: 'right', title: { display: true, text: 'Revenue' }, grid: { drawOnChartArea: false } },
      },
    },
  });
}

function groupChart(canvas, rows, dimension) {
  const top = [...rows].sort((a, b) => (b.received ?? 0) - (a.received ?? 0)).slice(0, BAR_LIMIT);
  const dataset = (key, label) => ({ key, label, data: top.map((r) => r[key] ?? 0), backgroundColor: COLORS[key] });
  return new Chart(canvas, {
    type: 'bar',
    data: { labels: top.map((r) => r[dimension] ?? '(none)'), datasets: [dataset('received', 'Received'), dataset('sold', 'Sold')] },
    options: { animation: false, maintainAspectRatio: false, scales: { y: { beginAtZero: true, ticks: { precision: 0 } } } },
  });
}

function table(rows, dimension) {
  const sum = totals(rows);
  const headers = [DIMENSIONS.find(([v]) => v === dimension)[1], ...COUNTS, ...MONEY, 'acceptance_rate', 'sell_rate', 'avg_price'];
  const cells = (row, label) => [
    h('td', {}, label),
    ...COUNTS.map((name) => h('td', { class: 'num', 'data-field': name }, count(row[name]))),
    ...MONEY.map((name) => h('td', { class: 'num', 'data-field': name }, money(row[name]))),
  ];
  return h(
    'table',
    { id: 'report-table', 'aria-labelledby': 'table-title' },
    h('thead', {}, h('tr', {}, headers.map((text, i) => h('th', { scope: 'col', class: i > 0 ? 'num' : undefined }, text.replace('_', ' '))))),
    h(
      'tbody',
      {},
      rows.map((row) =>
        h('tr', {}, cells(row, row[dimension] ?? '(none)'), h('td', { class: 'num' }, rate(row.acceptance_rate)), h('td', { class: 'num' }, rate(row.sell_rate)), h('td', { class: 'num' }, money(row.avg_price))),
      ),
    ),
    h('tfoot', {}, h('tr', { id: 'report-totals' }, cells(sum, 'Total'), h('td'), h('td'), h('td'))),
  );
}
