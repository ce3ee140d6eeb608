// The summary report for analysts and admins: by day as a time series, by a chosen dimension as
// bars, by that dimension and optionally a second one as a table, and the same rows as CSV. The
// table shows one set of the report's metrics at a time (outcome, rejections by code, ping-post):
// all of them at once would be some twenty columns, too wide to read a row across. Every number
// comes from GET /functions/reports/summary; the charts hold exactly what the API answered, its
// money headed with the currency the report names.

import { getAll, getCsv, getJson, explain, latest, ApiError } from './api.js';
import { h, field, select, say, markField, count, money, rate, withCurrency, cards, oneAtATime, outOfDate } from './dom.js';
import { codeTitled } from './words.js';

const DIMENSIONS = [['sid', 'Source (sid)'], ['s1', 'Click id (s1)'], ['state', 'State'], ['buyer', 'Buyer'], ['supplier', 'Supplier']];
const DEFAULT_GROUPING = 'sid';
/** The page groups by two dimensions at most: a third multiplies the rows past what a table is read by. */
const MOST_DIMENSIONS = 2;
const nameOf = (dimension) => DIMENSIONS.find(([d]) => d === dimension)[1];
/** The table's sets of metric columns, one shown at a time; the first is the default, left out of the address. */
const COLUMN_SETS = [['outcome', 'Outcome'], ['rejections', 'Rejections by code'], ['pings', 'Ping-post']];
const DEFAULT_COLUMNS = 'outcome';
const COUNTS = ['received', 'accepted', 'sold', 'unsold', 'rejected', 'returned'];
/** Money the report sums; an average of money (price, bid) is divided from sums instead. */
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
  pings: 'Pings',
  bids: 'Bids',
  ping_posts: 'Ping-posts',
  avg_bid: 'Average bid',
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
/** A day of the calendar (not 2026-02-30, which a date field cannot hold): the form can show it. */
const calendarDay = (v) => DAY.test(v) && !Number.isNaN(Date.parse(`${v}T00:00:00Z`)) && new Date(`${v}T00:00:00Z`).toISOString().slice(0, 10) === v;

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
    from: take('from', calendarDay, localDay(zone, new Date(Date.now() - 6 * 86_400_000))),
    to: take('to', calendarDay, localDay(zone)),
    tz: take('tz', knownZone, zone),
    group_by: take('group_by', showable, DEFAULT_GROUPING),
    columns: take('columns', (v) => COLUMN_SETS.some(([set]) => set === v), DEFAULT_COLUMNS),
    replaced,
  };
}

/**
 * The address of a report shown: its query, the default columns left out (an address from before
 * there was a choice names the same report), the comma between two dimensions left as written.
 */
function addressOf({ columns, ...query }) {
  const search = new URLSearchParams(columns === DEFAULT_COLUMNS ? query : { ...query, columns });
  return `#/report?${search.toString().replaceAll('%2C', ',')}`;
}

export async function renderReport(main, [search], current) {
  for (const chart of charts) chart.destroy();
  charts = [];
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
  const { replaced, ...initial } = asked(search, zone);
  // Asked for before the page is built (the time-zone list alone is some 400 options): these
  // answers are what the first chart waits for.
  // Only the newest Show's report is drawn: a Show withdraws the one before, whose answer may
  // come later (a report by s1 takes seconds), and the first report too.
  const shows = latest();
  const firstSignal = shows.next();
  const first = fetchReport(initial, firstSignal);
  first.catch(() => {}); // handled where it is awaited, in show()
  const [firstDimension, secondDimension = ''] = initial.group_by.split(',');
  const to = h('input', { type: 'date', name: 'to', required: true, value: initial.to });
  const from = h('input', { type: 'date', name: 'from', required: true, value: initial.from });
  const tz = select('tz', timeZones(zone, initial.tz), initial.tz);
  const groupBy = select('group_by', DIMENSIONS, firstDimension);
  const thenBy = select('then_by', [['', 'None'], ...DIMENSIONS], secondDimension);
  const columns = select('columns', COLUMN_SETS, initial.columns);
  const controls = { from, to, tz, group_by: groupBy, then_by: thenBy, columns };
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
    field('Columns', columns),
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Show'), csvButton),
  );
  // Never the same dimension twice: the first one's is not offered as the second.
  const oneEach = () => {
    for (const option of thenBy.options) option.disabled = option.value === groupBy.value;
    if (thenBy.value === groupBy.value) thenBy.value = '';
  };
  oneEach();
  groupBy.addEventListener('change', oneEach);
  const daily = h('canvas', { role: 'img', 'aria-label': 'Received, accepted, sold and revenue by day', 'aria-describedby': 'chart-daily-numbers-note' });
  const barsCanvas = h('canvas', { role: 'img', 'aria-label': 'Received and sold by the first grouping chosen', 'aria-describedby': 'chart-groups-numbers-note' });
  const dailyBox = h('div', { class: 'chart', id: 'chart-daily' }, daily);
  const barsBox = h('div', { class: 'chart', id: 'chart-groups' }, barsCanvas);
  const dailyNumbers = h('div', { id: 'chart-daily-numbers' });
  // What a report shown is drawn in: marked out of date together when a newer one does not come.
  const results = [];
  const barsNumbers = h('div', { id: 'chart-groups-numbers' });
  // Named by the grouping asked for from the start: a first report that fails leaves it standing.
  const barsTitle = h('h2', {}, `By ${nameOf(firstDimension).toLowerCase()}`);
  // Its own scroller, both ways (console.css): a keyboard reaches it with Tab and scrolls it with the arrows.
  const tableBox = h('div', { class: 'table-wrap rows', id: 'report-rows', role: 'region', tabindex: '0', 'aria-labelledby': 'table-title' });
  results.push(
    h('div', { class: 'charts results' }, h('section', { class: 'card' }, h('h2', {}, 'By day'), dailyBox, dailyNumbers), h('section', { class: 'card' }, barsTitle, barsBox, barsNumbers)),
    h('section', { class: 'card results' }, h('h2', { id: 'table-title' }, 'Rows'), tableBox),
  );
  main.append(h('h1', {}, 'Report'), form, status, ...results);

  const query = () => ({
    from: from.value,
    to: to.value,
    tz: tz.value,
    group_by: thenBy.value ? `${groupBy.value},${thenBy.value}` : groupBy.value,
    columns: columns.value,
  });
  const clearMarks = () => Object.values(controls).forEach((control) => markField(control, ''));
  /** The report on the page: its query and rows, so that other columns are shown without asking again. */
  let shown = null;

  function drawTable() {
    const { asked, rows, totals: sums, cut, barsCut, currency } = shown;
    const dimensions = asked.group_by.split(',');
    tableBox.replaceChildren(rows.length === 0 ? h('p', { class: 'muted', id: 'report-empty' }, 'No leads in these dates.') : table(inAskedOrder(rows, dimensions), sums, dimensions, asked.columns, currency));
    // Cut, the table's rows do not add up to its Total: said above them, where the numbers are read.
    if (cut) {
      // The API's key order: by s1 first whenever it is a dimension.
      const order = nameOf(dimensions.includes('s1') ? 's1' : dimensions[0]);
      tableBox.prepend(h('p', { class: 'muted', id: 'report-cut' }, `The table shows the report's first ${count(rows.length)} rows, taken in the order of ${order}; its Total row is of every row${barsCut ? '; the bars, as their title says, of the first rows by the first grouping' : ', and so are the bars'}. Download CSV for every row.`));
    }
    // A ping carries no click id, so by s1 its columns count nothing: said, rather than rows of zeros left to puzzle over.
    if (rows.length > 0 && asked.columns === 'pings' && dimensions.includes('s1')) {
      tableBox.prepend(h('p', { class: 'muted', id: 'report-note' }, 'A ping has no click id (s1): grouped by s1, pings, bids and the average bid count none. Group by source, state or buyer to see them.'));
    }
  }

  /**
   * Draws a report once its answers are in, and names it in the address (`rename`: unless the
   * address names it already); on a refusal, says what is wrong next to each field.
   */
  async function show(answer, asked, signal, rename = true) {
    say(status, 'Loading…');
    const dimension = asked.group_by.split(',')[0];
    let days;
    let groups;
    let bars;
    let barsCut;
    let sums;
    let currency;
    try {
      ({ days, groups, bars, barsCut, totals: sums } = await answer);
      currency = groups.head.currency ?? null;
    } catch (error) {
      if (!current() || signal.aborted) return false;
      refused(error);
      return false;
    }
    if (!current() || signal.aborted) return false;
    clearMarks();
    // In the columns chosen now: they may have been changed while the answers were on their way.
    const chosen = columns.value;
    // The address names the report shown, to bookmark or send; replaced, so no page change follows.
    if (rename || chosen !== asked.columns) history.replaceState(null, '', addressOf({ ...asked, columns: chosen }));
    for (const chart of charts) chart.destroy();
    charts = [dailyChart(daily, everyDay(days.head.from, days.head.to, days.items), currency), groupChart(barsCanvas, bars, dimension)];
    dailyBox.dataset.totals = JSON.stringify(chartTotals(charts[0]));
    barsBox.dataset.totals = JSON.stringify(chartTotals(charts[1]));
    dailyNumbers.replaceChildren(...chartNumbers(charts[0], 'chart-daily-numbers-note', 'Day'));
    barsNumbers.replaceChildren(...chartNumbers(charts[1], 'chart-groups-numbers-note', nameOf(dimension)));
    barsTitle.textContent = `By ${nameOf(dimension).toLowerCase()}${barsCut ? ` (top ${BAR_LIMIT} by received of the first ${count(bars.length)})` : bars.length > BAR_LIMIT ? ` (top ${BAR_LIMIT} by received)` : ''}`;
    const range = `${days.head.from} to ${days.head.to} in ${days.head.tz}`;
    // Named in words too, for a later Show that does not come to say which report is still shown.
    const named = `${range}, by ${asked.group_by.split(',').map((d) => nameOf(d).toLowerCase()).join(' then ')}`;
    shown = { asked: { ...asked, columns: chosen }, rows: groups.items, totals: sums, cut: groups.truncated, barsCut, currency, named };
    drawTable();
    for (const part of results) outOfDate(part, false);
    if (!performance.getEntriesByName('leadpost:first-chart').length) performance.mark('leadpost:first-chart');
    say(
      status,
      groups.items.length === 0
        ? `No leads in these dates (${range}).`
        : `${count(groups.items.length)} rows${groups.truncated ? ' (first 10,000 shown, totals of every row; the CSV has every row)' : ''}, ${range}. Test leads are left out.`,
    );
    return true;
  }

  /** What the charts and rows below are now, for a report that was not shown: the last one, or none yet. */
  const stillShown = () => (shown ? `The charts and rows below are still those of the last report shown (${shown.named})` : 'No report is shown yet');

  /**
   * A refused report: each field the service names, in words next to it; anything else in the
   * status line. A Show not answered for now (no answer, 429, 5xx) leaves the last report shown,
   * marked out of date, and says which report it is; a refused download leaves it as it is.
   */
  function refused(error, download = false) {
    clearMarks();
    const errors = error instanceof ApiError && error.status === 422 ? (error.body.errors ?? []) : [];
    const unplaced = [];
    for (const e of errors) {
      const words = fieldWords(e);
      if (words && controls[e.field]) markField(controls[e.field], words);
      else unplaced.push(e.message);
    }
    if (errors.length > 0) say(status, `This report cannot be shown${unplaced.length ? `: ${unplaced.join('; ')}` : ': see the fields marked'}. ${stillShown()}.`, 'error');
    else if (download) say(status, explain(error), 'error');
    else {
      say(status, `${explain(error)} ${stillShown()}${shown ? ', out of date' : ''}.`, 'error');
      if (shown) for (const part of results) outOfDate(part, true);
    }
    // The first field marked takes the keyboard, where the words about it are read.
    Object.values(controls).find((control) => control.getAttribute('aria-invalid') === 'true')?.focus();
  }

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const asked = query();
    const signal = shows.next();
    show(fetchReport(asked, signal), asked, signal);
  });
  // Other columns of the report shown, at once: its rows hold every metric, so nothing is asked
  // again, and the rest of the form (changed, not yet shown) waits for Show.
  columns.addEventListener('change', () => {
    if (!shown) return;
    markField(columns, '');
    shown.asked = { ...shown.asked, columns: columns.value };
    drawTable();
    history.replaceState(null, '', addressOf(shown.asked));
  });
  // The report shown, as its rows are on the page: not the form's values changed since and not yet
  // shown (those wait for Show). Before any report is shown, the form's.
  // One download a click: a double-click asks for the report once (oneAtATime).
  csvButton.addEventListener('click', oneAtATime(csvButton, async () => {
    const asked = shown?.asked ?? query();
    try {
      const { blob } = await getCsv(`/functions/reports/summary?${new URLSearchParams({ from: asked.from, to: asked.to, tz: asked.tz, group_by: asked.group_by })}`);
      // Named by everything that makes the report: its days, grouping (both dimensions) and time zone.
      const name = `leadpost-report-${asked.from}-${asked.to}-${asked.group_by.replace(',', '-')}-${asked.tz.replaceAll('/', '-')}.csv`;
      const link = h('a', { href: URL.createObjectURL(blob), download: name });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
    } catch (error) {
      refused(error, true);
    }
  }));
  // The address names this report already, unless it asked for something the form could not show.
  const wasShown = await show(first, initial, firstSignal, replaced.length > 0);
  // Values of the address the form could not show were replaced: said so next to their fields,
  // unless the service refused the report for a field, whose words then say what is wrong now.
  const replacedWords = {
    from: (v) => `The address asked for From “${v}”, which is not a date: showing ${from.value}.`,
    to: (v) => `The address asked for To “${v}”, which is not a date: showing ${to.value}.`,
    tz: (v) => `The address asked for time zone “${v}”, which is not one: showing ${tz.value}.`,
    group_by: (v, why) => `The address asked to group by “${v}”, ${why}: showing ${nameOf(groupBy.value)}.`,
    columns: (v) => `The address asked for columns “${v}”, which the table has not: showing ${COLUMN_SETS.find(([set]) => set === columns.value)[1]}.`,
  };
  for (const [name, value, why] of replaced) if (wasShown || controls[name].getAttribute('aria-invalid') !== 'true') markField(controls[name], replacedWords[name](value, why));
}

/**
 * What a report page shows: by day for the time series, by the chosen grouping for the table, and
 * by its first dimension for the bars: with two dimensions, the report by the first one alone,
 * far fewer rows than the table's. The table stops at 10,000 rows (about one a lead with s1 as a
 * dimension). Where it was cut, its Total row is the service's totals of the whole report
 * (`totals=true`, summed there in one query whatever the report's size), never the sum of the rows
 * shown. By s1 first, the bars' own report is cut too: they are then the top of its first 10,000
 * click ids, and their title says so. Exact bars by s1 would mean reading a row per lead of the
 * range into the page, which at a busy month's volume takes minutes.
 */
async function fetchReport({ from, to, tz, group_by: grouping }, signal) {
  const report = (groupBy) => getAll(REPORT, { from, to, tz, group_by: groupBy }, signal);
  const [firstDimension] = grouping.split(',');
  const single = firstDimension === grouping;
  const [days, shown, first] = await Promise.all([report('day'), report(grouping), single ? null : report(firstDimension)]);
  const byFirst = first ?? shown;
  const sums = shown.truncated ? await reportTotals({ from, to, tz, group_by: grouping }, signal) : totals(shown.items);
  return { days, groups: shown, bars: byFirst.items, barsCut: byFirst.truncated, totals: sums };
}

const REPORT = '/functions/reports/summary';

/** The whole report's totals as the service sums them, in the form `totals` gives the rows' sums. */
async function reportTotals(query, signal) {
  const page = await getJson(`${REPORT}?${new URLSearchParams({ ...query, limit: '1', totals: 'true' })}`, signal);
  const sums = { ...page.totals };
  // The bids' value, from which the Total row's average bid is computed as a row's sums give it.
  sums.bid_value = (sums.avg_bid ?? 0) * (sums.bids ?? 0);
  return sums;
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

/**
 * A chart's numbers as a table, under a disclosure: what the chart draws, for whoever cannot see
 * it (a screen reader hears the chart's name, then that its numbers follow) or wants the exact
 * figures. Read from the chart itself, every label whole, so it holds what is drawn.
 */
function chartNumbers(chart, noteId, first) {
  const { labels, datasets } = chart.data;
  const inMoneyKey = (key) => MONEY.includes(key);
  // At a phone's width each row a card (console.css), its values under their headings: five
  // columns of a day's numbers do not fit a phone's width side by side.
  const table = cards(h(
    'table',
    { class: 'chart-numbers' },
    h('caption', {}, `${chart.canvas.getAttribute('aria-label')}, as numbers`),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, first), datasets.map((d) => h('th', { scope: 'col', class: 'num' }, d.label)))),
    h('tbody', {}, labels.map((label, i) => h('tr', {}, h('th', { scope: 'row', class: 'name' }, String(label)), datasets.map((d) => h('td', { class: 'num' }, inMoneyKey(d.key) ? money(d.data[i]) : count(d.data[i])))))),
  ));
  return [
    h('p', { class: 'muted chart-note', id: noteId }, `Its ${labels.length === 1 ? 'number is' : 'numbers are'} in the table under "Show the numbers".`),
    h('details', {}, h('summary', {}, 'Show the numbers'), h('div', { class: 'table-wrap' }, table)),
  ];
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
 * The rates and averages of a row, each with the count it divides by and how it is written. The
 * API gives 0 where that count is 0; the table says there is nothing to divide instead, as 0% or
 * 0.00 would read as a measured result (a buyer that sold nothing has no average price).
 */
const RATIOS = [
  ['acceptance_rate', 'received', rate],
  ['sell_rate', 'accepted', rate],
  ['avg_price', 'sold', money],
  ['avg_bid', 'bids', money],
];
const NOTHING_TO_DIVIDE = '—';
const REJECTION_CODE = /^rejected_[A-Z_]+$/;

/**
 * A set's metric columns, in order. The rejections by code are the report's own rejected_<CODE>
 * columns, as its rows name them: a code the service adds is a column here without a change.
 */
function metricsOf(set, rows) {
  switch (set) {
    case 'rejections': {
      const codes = new Set();
      for (const row of rows) for (const name of Object.keys(row)) if (REJECTION_CODE.test(name)) codes.add(name);
      return ['received', 'rejected', ...codes];
    }
    case 'pings':
      return ['pings', 'bids', 'avg_bid', 'ping_posts', 'sold', 'revenue'];
    default:
      return [...COUNTS, ...MONEY, 'acceptance_rate', 'sell_rate', 'avg_price'];
  }
}

const inMoney = (name) => MONEY.includes(name) || name === 'avg_price' || name === 'avg_bid';

/** A metric's heading: in words, money with its currency; a rejection code in words, the code its tooltip (words.js). */
function heading(name, currency) {
  if (REJECTION_CODE.test(name)) return codeTitled(name.slice('rejected_'.length));
  return inMoney(name) ? withCurrency(WORDS[name], currency) : WORDS[name];
}

/** A metric of a row as the table writes it. */
function written(row, name) {
  const ratio = RATIOS.find(([ratioName]) => ratioName === name);
  if (ratio) return row[ratio[1]] > 0 ? ratio[2](row[name]) : NOTHING_TO_DIVIDE;
  return inMoney(name) ? money(row[name]) : count(row[name]);
}

/** Sums of every counter and money of some rows (rates and averages left out), money to the cent. */
function totals(rows) {
  const sum = {};
  const ratios = new Set(RATIOS.map(([name]) => name));
  for (const row of rows) for (const [name, value] of Object.entries(row)) if (typeof value === 'number' && !ratios.has(name)) sum[name] = (sum[name] ?? 0) + value;
  for (const name of MONEY) sum[name] = Math.round((sum[name] ?? 0) * 100) / 100;
  // A row gives its average bid to the cent, not what was bid in all: the bids' value is
  // rebuilt from each row's average and count, so the totals' average may be a cent off the exact one.
  sum.bid_value = rows.reduce((s, row) => s + (row.avg_bid ?? 0) * (row.bids ?? 0), 0);
  return sum;
}

/** The totals' rates and averages, from the totals themselves, as the report computes a row's. */
function withRatios(sum) {
  const over = (a, b) => (b > 0 ? a / b : 0);
  return {
    ...sum,
    acceptance_rate: over(sum.accepted, sum.received),
    sell_rate: over(sum.sold, sum.accepted),
    avg_price: Math.round(over(sum.revenue, sum.sold) * 100) / 100,
    avg_bid: Math.round(over(sum.bid_value, sum.bids) * 100) / 100,
  };
}

/**
 * The report's rows: a column per dimension asked (the first kept in sight), then the set's
 * metrics, and the report's totals (`sums`: of every row, also where the rows shown were cut).
 */
function table(rows, sums, dimensions, set, currency) {
  const metrics = metricsOf(set, rows);
  const cells = (row, names) => [
    ...dimensions.map((dimension, i) => h('td', { class: 'name', 'data-field': dimension }, names[i])),
    ...metrics.map((name) => h('td', { class: 'num', 'data-field': name }, written(row, name))),
  ];
  return cards(h(
    'table',
    { id: 'report-table', class: dimensions.length > 1 ? 'two-dimensions' : undefined, 'aria-labelledby': 'table-title', 'data-columns': set },
    h('thead', {}, h('tr', {}, dimensions.map((d) => h('th', { scope: 'col' }, nameOf(d))), metrics.map((name) => h('th', { scope: 'col', class: 'num' }, heading(name, currency))))),
    h(
      'tbody',
      {},
      rows.map((row) => h('tr', {}, cells(row, dimensions.map((d) => row[d] ?? '(none)')))),
    ),
    // The totals' row is named in its first cell; the other dimensions' cells are empty.
    h('tfoot', {}, h('tr', { id: 'report-totals' }, cells(withRatios(sums), dimensions.map((_, i) => (i === 0 ? 'Total' : ''))))),
  ));
}
