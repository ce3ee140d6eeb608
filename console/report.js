// The summary report for analysts and admins: by day as a time series, by a chosen dimension as
// bars, by that dimension and optionally a second one as a table, and the same rows as CSV. Every
// number comes from GET /functions/reports/summary; the charts hold exactly what the API answered,
// its money headed with the currency the report names.

import { getAll, getCsv, explain, ApiError } from './api.js';
import { h, field, select, say, markField, count, money, rate, withCurrency, cards } from './dom.js';

const DIMENSIONS = [['sid', 'Source (sid)'], ['s1', 'Click id (s1)'], ['state', 'State'], ['buyer', 'Buyer'], ['supplier', 'Supplier']];
const DEFAULT_GROUPING = 'sid';
/** The page groups by two dimensions at most: a third multiplies the rows past what a table is read by. */
const MOST_DIMENSIONS = 2;
const nameOf = (dimension) => DIMENSIONS.find(([d]) => d === dimension)[1];
const COUNTS = ['received', 'accepted', 'sold', 'unsold', 'rejected', 'returned'];
const MONEY = ['revenue', 'net_revenue'];
/** The report's columns in words, for the table's headings. */
const WORDS = {
  received: 'Received',
  accepted: 'Accepted',
  sold: 'Sold',
  unsold: 'Unsold',
  rejected: 'Rejected',
  returned: 'Returned',
  revenue: 'Revenue',
  net_revenue: 'Net revenue',
  acceptance_rate: 'Acceptance rate',
  sell_rate: 'Sell rate',
  avg_price: 'Average price',
};
const BAR_LIMIT = 20;
/** A bar's label under its bar, cut to this many characters (a click id may have 255): its tooltip has it whole. */
const TICK_CHARS = 24;

/** A refused field of the report's query, in plain words; null for one the page has no words for. */
function fieldWords(error) {
  switch (`${error.field} ${error.code}`) {
    case 'from out_of_range':
      return 'From must be on or before To.';
    case 'to out_of_range':
      // As the service counts: To at most 366 days after From (367 days with both ends).
      return 'To must be at most 366 days after From: bring them closer together.';
    case 'from invalid_format':
    case 'to invalid_format':
      return 'Give a date.';
    case 'tz invalid_value':
      return 'The service does not know this time zone: choose another.';
    case 'group_by invalid_value':
      return 'Choose one of the groupings listed.';
    default:
      return null;
  }
}

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

/**
 * Whether the form can show a grouping (`sid`, `sid,s1`): true, or why not, in words for the note
 * next to its field. The API takes more (day, three dimensions and more); the page does not.
 */
function showable(grouping) {
  const dimensions = grouping.split(',');
  if (!dimensions.every((d) => DIMENSIONS.some(([known]) => known === d))) return 'which the report cannot';
  if (dimensions.length > MOST_DIMENSIONS) return `more dimensions than the ${MOST_DIMENSIONS} the page shows`;
  if (new Set(dimensions).size < dimensions.length) return 'the same dimension twice';
  return true;
}

let charts = [];

const DAY = /^\d{4}-\d{2}-\d{2}$/;

/**
 * The report's query from the hash (#/report?from=…), each value kept only if the form can show it;
 * what is missing takes the form's default (the last seven days in the browser's zone). A value the
 * form cannot show is replaced by that default too, and listed in `replaced` ([field, what was
 * asked, why not]): the page says so next to the field, and the address then names the report shown.
 */
function asked(search, zone) {
  const query = new URLSearchParams(search ?? '');
  const replaced = [];
  const take = (name, usable, fallback) => {
    const value = query.get(name);
    if (value === null || value === '') return fallback;
    const verdict = usable(value);
    if (verdict === true) return value;
    replaced.push([name, value, verdict]);
    return fallback;
  };
  return {
    from: take('from', (v) => DAY.test(v), localDay(zone, new Date(Date.now() - 6 * 86_400_000))),
    to: take('to', (v) => DAY.test(v), localDay(zone)),
    tz: take('tz', knownZone, zone),
    group_by: take('group_by', showable, DEFAULT_GROUPING),
    replaced,
  };
}

/** The address of a report shown: its query, the comma between two dimensions left as written. */
function addressOf(query) {
  const search = new URLSearchParams(query);
  return `#/report?${search.toString().replaceAll('%2C', ',')}`;
}

export async function renderReport(main, [search], current) {
  for (const chart of charts) chart.destroy();
  charts = [];
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
  const { replaced, ...initial } = asked(search, zone);
  // Asked for before the page is built (the time-zone list alone is some 400 options): these
  // answers are what the first chart waits for.
  const first = fetchReport(initial);
  first.catch(() => {}); // handled where it is awaited, in show()
  const [firstDimension, secondDimension = ''] = initial.group_by.split(',');
  const to = h('input', { type: 'date', name: 'to', required: true, value: initial.to });
  const from = h('input', { type: 'date', name: 'from', required: true, value: initial.from });
  const tz = select('tz', timeZones(zone, initial.tz), initial.tz);
  const groupBy = select('group_by', DIMENSIONS, firstDimension);
  const thenBy = select('then_by', [['', 'None'], ...DIMENSIONS], secondDimension);
  const controls = { from, to, tz, group_by: groupBy, then_by: thenBy };
  const csvButton = h('button', { type: 'button', class: 'secondary' }, 'Download CSV');
  const status = h('p', { class: 'muted', role: 'status', 'aria-live': 'polite', id: 'report-status' });
  const form = h(
    'form',
    { class: 'card filters', 'aria-label': 'Report filters' },
    field('From', from),
    field('To', to),
    field('Time zone', tz),
    field('Group by', groupBy),
    field('Then by', thenBy),
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Show'), csvButton),
  );
  // Never the same dimension twice: the first one's is not offered as the second.
  const oneEach = () => {
    for (const option of thenBy.options) option.disabled = option.value === groupBy.value;
    if (thenBy.value === groupBy.value) thenBy.value = '';
  };
  oneEach();
  groupBy.addEventListener('change', oneEach);
  const daily = h('canvas', { role: 'img', 'aria-label': 'Received, accepted, sold and revenue by day' });
  const bars = h('canvas', { role: 'img', 'aria-label': 'Received and sold by the first grouping chosen' });
  const dailyBox = h('div', { class: 'chart', id: 'chart-daily' }, daily);
  const barsBox = h('div', { class: 'chart', id: 'chart-groups' }, bars);
  // Named by the grouping asked for from the start: a first report that fails leaves it standing.
  const barsTitle = h('h2', {}, `By ${nameOf(firstDimension).toLowerCase()}`);
  // Its own scroller, both ways (console.css): a keyboard reaches it with Tab and scrolls it with the arrows.
  const tableBox = h('div', { class: 'table-wrap rows', id: 'report-rows', role: 'region', tabindex: '0', 'aria-labelledby': 'table-title' });
  main.append(
    h('h1', {}, 'Report'),
    form,
    status,
    h('div', { class: 'charts results' }, h('section', { class: 'card' }, h('h2', {}, 'By day'), dailyBox), h('section', { class: 'card' }, barsTitle, barsBox)),
    h('section', { class: 'card results' }, h('h2', { id: 'table-title' }, 'Rows'), tableBox),
  );

  const query = () => ({
    from: from.value,
    to: to.value,
    tz: tz.value,
    group_by: thenBy.value ? `${groupBy.value},${thenBy.value}` : groupBy.value,
  });
  const clearMarks = () => Object.values(controls).forEach((control) => markField(control, ''));

  /**
   * Draws a report once its answers are in, and names it in the address (`rename`: unless the
   * address names it already); on a refusal, says what is wrong next to each field.
   */
  async function show(answer, asked, rename = true) {
    say(status, 'Loading…');
    const dimension = asked.group_by.split(',')[0];
    let days;
    let groups;
    let byFirst;
    let currency;
    try {
      [days, groups, byFirst] = await answer;
      currency = groups.head.currency ?? null;
    } catch (error) {
      if (!current()) return false;
      refused(error);
      return false;
    }
    if (!current()) return false;
    clearMarks();
    // The address names the report shown, to bookmark or send; replaced, so no page change follows.
    if (rename) history.replaceState(null, '', addressOf(asked));
    for (const chart of charts) chart.destroy();
    charts = [dailyChart(daily, everyDay(days.head.from, days.head.to, days.items), currency), groupChart(bars, byFirst.items, dimension)];
    dailyBox.dataset.totals = JSON.stringify(chartTotals(charts[0]));
    barsBox.dataset.totals = JSON.stringify(chartTotals(charts[1]));
    barsTitle.textContent = `By ${nameOf(dimension).toLowerCase()}${byFirst.items.length > BAR_LIMIT ? ` (top ${BAR_LIMIT} by received)` : ''}`;
    const dimensions = asked.group_by.split(',');
    tableBox.replaceChildren(groups.items.length === 0 ? h('p', { class: 'muted', id: 'report-empty' }, 'No leads in these dates.') : table(inAskedOrder(groups.items, dimensions), dimensions, currency));
    if (!performance.getEntriesByName('leadpost:first-chart').length) performance.mark('leadpost:first-chart');
    const range = `${days.head.from} to ${days.head.to} in ${days.head.tz}`;
    say(
      status,
      groups.items.length === 0
        ? `No leads in these dates (${range}).`
        : `${groups.items.length} rows${groups.truncated ? ' (first 10,000 shown; the CSV has every row)' : ''}, ${range}. Test leads are left out.`,
    );
    return true;
  }

  /** A refused report: each field the service names, in words next to it; anything else in the status line. */
  function refused(error) {
    clearMarks();
    const errors = error instanceof ApiError && error.status === 422 ? (error.body.errors ?? []) : [];
    const unplaced = [];
    for (const e of errors) {
      const words = fieldWords(e);
      if (words && controls[e.field]) markField(controls[e.field], words);
      else unplaced.push(e.message);
    }
    if (errors.length === 0) say(status, explain(error), 'error');
    else say(status, `This report cannot be shown${unplaced.length ? `: ${unplaced.join('; ')}` : ': see the fields marked'}. The charts below are still the last report shown.`, 'error');
    // The first field marked takes the keyboard, where the words about it are read.
    Object.values(controls).find((control) => control.getAttribute('aria-invalid') === 'true')?.focus();
  }

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const asked = query();
    show(fetchReport(asked), asked);
  });
  csvButton.addEventListener('click', async () => {
    const asked = query();
    try {
      const { blob } = await getCsv(`/functions/reports/summary?${new URLSearchParams(asked)}`);
      // Named by everything that makes the report: its days, grouping (both dimensions) and time zone.
      const name = `leadpost-report-${asked.from}-${asked.to}-${asked.group_by.replace(',', '-')}-${asked.tz.replaceAll('/', '-')}.csv`;
      const link = h('a', { href: URL.createObjectURL(blob), download: name });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
    } catch (error) {
      refused(error);
    }
  });
  // The address names this report already, unless it asked for something the form could not show.
  const wasShown = await show(first, initial, replaced.length > 0);
  // Values of the address the form could not show were replaced: said so next to their fields.
  if (wasShown) {
    const words = {
      from: (v) => `The address asked for From “${v}”, which is not a date: showing ${from.value}.`,
      to: (v) => `The address asked for To “${v}”, which is not a date: showing ${to.value}.`,
      tz: (v) => `The address asked for time zone “${v}”, which is not one: showing ${tz.value}.`,
      group_by: (v, why) => `The address asked to group by “${v}”, ${why}: showing ${nameOf(groupBy.value)}.`,
    };
    for (const [name, value, why] of replaced) markField(controls[name], words[name](value, why));
  }
}

/**
 * What a report page shows: by day for the time series, by the chosen grouping for the table, and
 * by its first dimension for the bars. With two dimensions the bars have a query of their own
 * rather than the table's rows summed per first value: the table stops at 10,000 rows (about one a
 * lead with s1 as either dimension), and a sum of a cut list would draw bars short of the report;
 * the API's rows by the first dimension are exact, and far fewer.
 */
function fetchReport({ from, to, tz, group_by: grouping }) {
  const report = (groupBy) => getAll('/functions/reports/summary', { from, to, tz, group_by: groupBy });
  const [firstDimension] = grouping.split(',');
  const groups = report(grouping);
  return Promise.all([report('day'), groups, firstDimension === grouping ? groups : report(firstDimension)]);
}

/** Key order as the report's stores have it: null first, then by code point (UTF-8's byte order). */
function compareValues(a, b) {
  if (a === b) return 0;
  if (a === null || a === undefined) return -1;
  if (b === null || b === undefined) return 1;
  const [x, y] = [[...String(a)], [...String(b)]];
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i].codePointAt(0) - y[i].codePointAt(0);
  return x.length - y.length;
}

/**
 * The rows in the order of the dimensions asked, so that the rows of a first dimension's value
 * stand together. The API orders by s1 first whenever it is one of them (it reads along the leads'
 * index on s1): grouped by sid then s1, its rows would scatter each source through the table.
 * Otherwise its order is the asked one already, and kept.
 */
function inAskedOrder(rows, dimensions) {
  if (dimensions[0] === 's1' || !dimensions.includes('s1')) return rows;
  const key = (row) => dimensions.map((d) => row[d] ?? null);
  return [...rows].sort((a, b) => {
    const [x, y] = [key(a), key(b)];
    for (let i = 0; i < x.length; i++) {
      const order = compareValues(x[i], y[i]);
      if (order !== 0) return order;
    }
    return 0;
  });
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

function dailyChart(canvas, rows, currency) {
  const dataset = (key, label, extra = {}) => ({ key, label, data: rows.map((r) => r[key] ?? 0), borderColor: COLORS[key], backgroundColor: COLORS[key], ...extra });
  return new Chart(canvas, {
    type: 'line',
    data: {
      labels: rows.map((r) => r.day),
      datasets: [
        dataset('received', 'Received'),
        dataset('accepted', 'Accepted'),
        dataset('sold', 'Sold'),
        dataset('revenue', withCurrency('Revenue', currency), { type: 'bar', yAxisID: 'money', backgroundColor: 'rgba(199, 119, 0, 0.35)', order: 2 }),
      ],
    },
    options: {
      animation: false,
      maintainAspectRatio: false,
      interaction: { mode: 'index', intersect: false },
      scales: {
        y: { beginAtZero: true, title: { display: true, text: 'Leads' }, ticks: { precision: 0 } },
        money: { beginAtZero: true, position: 'right', title: { display: true, text: withCurrency('Revenue', currency) }, grid: { drawOnChartArea: false } },
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
    options: {
      animation: false,
      maintainAspectRatio: false,
      scales: {
        // Uncut, one long label would take the chart's height for itself and run past its card.
        x: { ticks: { callback(value) { const label = String(this.getLabelForValue(value)); return label.length > TICK_CHARS ? `${label.slice(0, TICK_CHARS - 1)}…` : label; } } },
        y: { beginAtZero: true, ticks: { precision: 0 } },
      },
    },
  });
}

/**
 * The rates and average of a row, each with the count it divides by and how it is written. The
 * API gives 0 where that count is 0; the table says there is nothing to divide instead, as 0% or
 * 0.00 would read as a measured result (a buyer that sold nothing has no average price).
 */
const RATIOS = [
  ['acceptance_rate', 'received', rate],
  ['sell_rate', 'accepted', rate],
  ['avg_price', 'sold', money],
];
const NOTHING_TO_DIVIDE = '—';

/** The totals' rates and average, from the totals themselves, as the report computes a row's. */
function withRatios(sum) {
  const over = (a, b) => (b > 0 ? a / b : 0);
  return {
    ...sum,
    acceptance_rate: over(sum.accepted, sum.received),
    sell_rate: over(sum.sold, sum.accepted),
    avg_price: Math.round(over(sum.revenue, sum.sold) * 100) / 100,
  };
}

/** The report's rows: a column per dimension asked (the first kept in sight), then its metrics, and their totals. */
function table(rows, dimensions, currency) {
  const sum = totals(rows);
  const headers = [
    ...COUNTS.map((name) => WORDS[name]),
    ...MONEY.map((name) => withCurrency(WORDS[name], currency)),
    WORDS.acceptance_rate,
    WORDS.sell_rate,
    withCurrency(WORDS.avg_price, currency),
  ];
  const cells = (row, names) => [
    ...dimensions.map((dimension, i) => h('td', { class: 'name', 'data-field': dimension }, names[i])),
    ...COUNTS.map((name) => h('td', { class: 'num', 'data-field': name }, count(row[name]))),
    ...MONEY.map((name) => h('td', { class: 'num', 'data-field': name }, money(row[name]))),
    ...RATIOS.map(([name, over, shown]) => h('td', { class: 'num', 'data-field': name }, row[over] > 0 ? shown(row[name]) : NOTHING_TO_DIVIDE)),
  ];
  return cards(h(
    'table',
    { id: 'report-table', 'aria-labelledby': 'table-title' },
    h('thead', {}, h('tr', {}, dimensions.map((d) => h('th', { scope: 'col' }, nameOf(d))), headers.map((text) => h('th', { scope: 'col', class: 'num' }, text)))),
    h(
      'tbody',
      {},
      rows.map((row) => h('tr', {}, cells(row, dimensions.map((d) => row[d] ?? '(none)')))),
    ),
    // The totals' row is named in its first cell; the other dimensions' cells are empty.
    h('tfoot', {}, h('tr', { id: 'report-totals' }, cells(withRatios(sum), dimensions.map((_, i) => (i === 0 ? 'Total' : ''))))),
  ));
}
