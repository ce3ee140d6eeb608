import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Browser, type Page } from 'playwright-core';
import { launchChromium, signIn, skipWithoutChromium } from '../support/chromium.js';
import { TestService, validLead } from '../support/service.js';

// The report page as an analyst asks it "which click ids of a source are rejected, and why" and
// "which buyer bids on which state": grouped by two dimensions, with the table's columns switched
// between the outcome, the rejections by code and the ping-post metrics. Every cell is held to what
// the report API answers for the same query, the address names the report (a reload shows it
// again), and the CSV is the API's. Screenshots go to SHOTS.

const SHOTS = 'test-results/console';
const ROUTING = {
  currency: 'USD',
  duplicate_window_days: 30,
  buyers: [
    { id: 'ca-buyer', price: 40.07, states: ['CA'], ping: { kind: 'static' } },
    { id: 'tx-buyer', price: 25.5, states: ['TX', 'CA'], ping: { kind: 'static' } },
    { id: 'wa-buyer', price: 33.33, states: ['WA'] },
  ],
  buckets: [{ id: 'unsold', default: true }],
};
const STATES = [{ accident_state: 'CA' }, { accident_state: 'WA', zip: '98101' }, { accident_state: 'TX', zip: '75001' }, { accident_state: 'NY', zip: '10001' }];

type Row = Record<string, string | number | null>;

/** The table's columns for each set, as headings and the report's fields under them. */
const COLUMNS: Record<string, Array<[string, string]>> = {
  outcome: [
    ['Received', 'received'], ['Accepted', 'accepted'], ['Sold', 'sold'], ['Unsold', 'unsold'], ['Rejected', 'rejected'], ['Returned', 'returned'],
    ['Revenue (USD)', 'revenue'], ['Net revenue (USD)', 'net_revenue'], ['Acceptance rate', 'acceptance_rate'], ['Sell rate', 'sell_rate'], ['Average price (USD)', 'avg_price'],
  ],
  rejections: [
    ['Received', 'received'], ['Rejected', 'rejected'],
    // Each code in words (its code is the heading's tooltip).
    ...([['Invalid fields', 'INVALID'], ['Failed verification', 'VERIFICATION_FAILED'], ['Duplicate', 'DUPLICATE'], ['Do not contact', 'SUPPRESSED'], ['Ping expired', 'PING_EXPIRED'], ['Ping already used', 'PING_CONSUMED'], ['Does not match its ping', 'PING_MISMATCH']] as const).map(
      ([words, code]): [string, string] => [words, `rejected_${code}`],
    ),
  ],
  pings: [['Pings', 'pings'], ['Bids', 'bids'], ['Average bid (USD)', 'avg_bid'], ['Ping-posts', 'ping_posts'], ['Sold', 'sold'], ['Revenue (USD)', 'revenue']],
};
const NAMES: Record<string, string> = { sid: 'Source (sid)', s1: 'Click id (s1)', state: 'State', buyer: 'Buyer', supplier: 'Supplier' };
/** What a rate or average divides by: with nothing, the page writes a dash. */
const OVER: Record<string, string> = { acceptance_rate: 'received', sell_rate: 'accepted', avg_price: 'sold', avg_bid: 'bids' };

/** A metric as the page should write it: counts with thousands commas, money to the cent, rates in % to a tenth. */
function written(row: Row, field: string): string {
  const value = row[field] as number;
  if (OVER[field] && !((row[OVER[field]!] as number) > 0)) return '—';
  if (field.endsWith('_rate')) return `${(value * 100).toFixed(1)}%`;
  if (['revenue', 'net_revenue', 'avg_price', 'avg_bid'].includes(field)) return value.toFixed(2);
  return value.toLocaleString('en-US');
}

/** The totals of some rows as the page should compute them: sums, and the rates and averages of the sums. */
function totalsOf(rows: Row[]): Row {
  const sum = (field: string) => rows.reduce((s, row) => s + (row[field] as number), 0);
  const total: Row = {};
  for (const set of Object.values(COLUMNS)) for (const [, field] of set) if (!OVER[field]) total[field] = Math.round(sum(field) * 100) / 100;
  const over = (a: number, b: number) => (b > 0 ? a / b : 0);
  total.acceptance_rate = over(sum('accepted'), sum('received'));
  total.sell_rate = over(sum('sold'), sum('accepted'));
  total.avg_price = Math.round(over(sum('revenue'), sum('sold')) * 100) / 100;
  // The rows give their average bid, not what was bid: weighted by their bids.
  total.avg_bid = Math.round(over(rows.reduce((s, row) => s + (row.avg_bid as number) * (row.bids as number), 0), sum('bids')) * 100) / 100;
  return total;
}

/** Key order of the report: by each dimension in turn, null first. */
function byDimensions(dimensions: string[]) {
  return (a: Row, b: Row): number => {
    for (const d of dimensions) {
      const [x, y] = [a[d] ?? null, b[d] ?? null];
      if (x === y) continue;
      if (x === null) return -1;
      if (y === null) return 1;
      return String(x) < String(y) ? -1 : 1;
    }
    return 0;
  };
}

describe('the report page grouped by two dimensions, with its sets of columns', function () {
  this.timeout(180_000);
  let svc: TestService | undefined;
  let browser: Browser | undefined;
  let analyst: string;
  let origin: string;
  const day = (days: number) => new Date(Date.now() + days * 86_400_000).toISOString().slice(0, 10);
  const dates = () => ({ from: day(-1), to: day(1), tz: 'UTC' });

  before(async function () {
    skipWithoutChromium(this);
    svc = await TestService.start({ routing: ROUTING });
    origin = `https://127.0.0.1:${svc.port}`;
    const suppliers = [await svc.key('supplier', 'sup-a'), await svc.key('supplier', 'sup-b')];
    analyst = await svc.key('analyst', 'ann');
    const post = async (lead: Record<string, unknown>, n: number, status: number, path?: string) => {
      const reply = await svc!.post(lead, { 'x-api-key': suppliers[n % 2]! }, path);
      expect(reply.status, reply.text).to.equal(status);
      return reply.body;
    };
    // Sold, unsold, and every kind of rejection this service can be made to give, spread over three
    // sources and their click ids.
    for (let i = 0; i < 24; i++) await post(validLead({ ...STATES[i % 4], sid: `sid-${i % 3}`, s1: `click-${i % 5}` }), i, 201);
    for (let i = 0; i < 5; i++) await post(validLead({ zip: 'bad', sid: `sid-${i % 2}`, s1: `click-${i}` }), i, 422);
    for (let i = 0; i < 3; i++) await post(validLead({ email: `ada.${i}@no-mx.example.com`, sid: 'sid-1', s1: `click-${i + 2}` }), i, 422);
    const first = validLead({ sid: 'sid-2', s1: 'click-0' });
    await post(first, 0, 201);
    for (let i = 0; i < 2; i++) await post(validLead({ email: first.email, sid: 'sid-2', s1: `click-${i + 3}` }), 0, 409);
    // Pings: each bid on by the buyers that take its state, some posted (sold at the bid), one
    // posted twice, one posted from another state.
    const pings: string[] = [];
    for (let i = 0; i < 6; i++) {
      const pinged = await post({ zip: i % 2 === 0 ? '90210' : '75001', accident_state: i % 2 === 0 ? 'CA' : 'TX', sid: `sid-${i % 3}` }, 0, 201, '/functions/pings');
      pings.push(pinged.ping_id as string);
    }
    await post(validLead({ ping_id: pings[0], sid: 'sid-0', s1: 'click-1' }), 0, 201);
    await post(validLead({ ping_id: pings[1], zip: '75001', accident_state: 'TX', sid: 'sid-1', s1: 'click-2' }), 0, 201);
    await post(validLead({ ping_id: pings[0], sid: 'sid-0', s1: 'click-3' }), 0, 409);
    await post(validLead({ ping_id: pings[2], zip: '98101', accident_state: 'WA', sid: 'sid-2', s1: 'click-4' }), 0, 422);
    await svc.service.projections.waitFor(await svc.service.store.headPosition());
    browser = await launchChromium(SHOTS);
  });
  after(async () => {
    await browser?.close();
    await svc?.stop();
  });

  async function signedIn(viewport = { width: 1280, height: 800 }, options: { acceptDownloads?: boolean } = {}): Promise<{ page: Page; problems: string[]; close: () => Promise<void> }> {
    const context = await browser!.newContext({ ignoreHTTPSErrors: true, viewport, ...options });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => message.type() === 'error' && problems.push(`console: ${message.text()}`));
    await signIn(page, origin, analyst);
    await page.waitForURL('**/console#/report');
    await page.locator('#report-totals').waitFor();
    return { page, problems, close: () => context.close() };
  }

  /** Opens the report an address names and waits until it is drawn. */
  async function open(page: Page, search: string): Promise<void> {
    await page.goto(`${origin}/console#/report?${search}`);
    await page.locator('#report-status', { hasText: ' rows, ' }).waitFor();
  }

  async function api(search: string): Promise<Row[]> {
    const reply = await svc!.request('GET', `/functions/reports/summary?${search}&limit=500`, { 'x-api-key': analyst });
    expect(reply.status, reply.text).to.equal(200);
    return reply.body.items as Row[];
  }

  /** The table as shown: its headings, then each row's cells and the totals', as text. */
  const shownTable = (page: Page) =>
    page.evaluate(`(() => {
      const table = document.getElementById('report-table');
      const texts = (tr) => [...tr.cells].map((cell) => cell.textContent);
      return { heads: texts(table.tHead.rows[0]), rows: [...table.tBodies[0].rows].map(texts), total: texts(table.tFoot.rows[0]) };
    })()`) as Promise<{ heads: string[]; rows: string[][]; total: string[] }>;

  /** The table the page should show for the API's rows of `dimensions`, in columns `set`. */
  function wantedTable(rows: Row[], dimensions: string[], set: string) {
    const columns = COLUMNS[set]!;
    return {
      heads: [...dimensions.map((d) => NAMES[d]), ...columns.map(([head]) => head)],
      rows: [...rows].sort(byDimensions(dimensions)).map((row) => [...dimensions.map((d) => String(row[d] ?? '(none)')), ...columns.map(([, field]) => written(row, field))]),
      total: ['Total', ...dimensions.slice(1).map(() => ''), ...columns.map(([, field]) => written(totalsOf(rows), field))],
    };
  }

  it('grouped by source then click id, every set of columns holds the API’s rows cell by cell, its totals their sums; the address names it and a reload shows it again', async function () {
    const { page, problems, close } = await signedIn();
    const query = new URLSearchParams(dates());
    await open(page, `${query}&group_by=sid,s1`);
    expect(new URL(page.url()).hash, 'an address the page can show is kept as written').to.equal(`#/report?${query}&group_by=sid,s1`);
    expect([await page.getByLabel('Group by').inputValue(), await page.getByLabel('Then by').inputValue(), await page.getByLabel('Columns').inputValue()]).to.deep.equal(['sid', 's1', 'outcome']);
    const rows = await api(`${query}&group_by=sid,s1`);
    // The API orders rows by s1 first (its index); the table has the same rows, each source's together.
    expect(rows.length).to.be.greaterThan(10);
    const sums = totalsOf(rows);
    expect(sums, 'the leads seeded give every kind of number').to.include({ rejected_INVALID: 5, rejected_VERIFICATION_FAILED: 3, rejected_DUPLICATE: 2, rejected_PING_CONSUMED: 1, rejected_PING_MISMATCH: 1 });
    for (const set of ['outcome', 'rejections', 'pings']) {
      await page.getByLabel('Columns').selectOption(set);
      await page.locator(`#report-table[data-columns="${set}"]`).waitFor();
      expect(await shownTable(page), set).to.deep.equal(wantedTable(rows, ['sid', 's1'], set));
      const address = `#/report?${query}&group_by=sid,s1${set === 'outcome' ? '' : `&columns=${set}`}`;
      expect(new URL(page.url()).hash, set).to.equal(address);
      await page.screenshot({ path: join(SHOTS, `report-sid-s1-${set}.png`), fullPage: true });
      // The address, reloaded: the same report, the same columns, the same form.
      const before = await shownTable(page);
      await page.reload();
      await page.locator(`#report-table[data-columns="${set}"]`).waitFor();
      await page.locator('#report-status', { hasText: ' rows, ' }).waitFor();
      expect(await shownTable(page), `${set} reloaded`).to.deep.equal(before);
      expect(new URL(page.url()).hash).to.equal(address);
      expect([await page.getByLabel('Group by').inputValue(), await page.getByLabel('Then by').inputValue(), await page.getByLabel('Columns').inputValue()]).to.deep.equal(['sid', 's1', set]);
    }
    // The bars are by the first dimension: the API's rows by source alone.
    const bySid = await api(`${query}&group_by=sid`);
    expect(JSON.parse((await page.locator('#chart-groups').getAttribute('data-totals'))!)).to.deep.equal({
      received: bySid.reduce((s, row) => s + (row.received as number), 0),
      sold: bySid.reduce((s, row) => s + (row.sold as number), 0),
    });
    const labels = await page.evaluate("Chart.getChart(document.querySelector('#chart-groups canvas')).data.labels");
    expect([...(labels as string[])].sort()).to.deep.equal(bySid.map((row) => String(row.sid ?? '(none)')).sort());
    expect(await page.locator('#chart-groups').locator('xpath=..').getByRole('heading').innerText()).to.equal('By source (sid)');
    expect(problems).to.deep.equal([]);
    await close();
  });

  it('which buyer bids on which state: by buyer then state, the ping-post columns are the API’s', async function () {
    const { page, problems, close } = await signedIn();
    const query = new URLSearchParams(dates());
    await open(page, `${query}&group_by=buyer,state&columns=pings`);
    const rows = await api(`${query}&group_by=buyer,state`);
    expect(rows.filter((row) => row.buyer === 'tx-buyer' && (row.bids as number) > 0).map((row) => row.state).sort(), 'tx-buyer bid on both its states').to.deep.equal(['CA', 'TX']);
    expect(await shownTable(page)).to.deep.equal(wantedTable(rows, ['buyer', 'state'], 'pings'));
    await page.screenshot({ path: join(SHOTS, 'report-buyer-state-pings.png'), fullPage: true });
    expect(await page.locator('#report-note').count(), 'no note where pings count').to.equal(0);
    // By click id the ping columns count nothing: the page says why, and the note goes with other columns.
    await open(page, `${query}&group_by=sid,s1&columns=pings`);
    expect(await page.locator('#report-note').innerText()).to.contain('A ping has no click id (s1)');
    await page.getByLabel('Columns').selectOption('outcome');
    expect(await page.locator('#report-note').count()).to.equal(0);
    expect(problems).to.deep.equal([]);
    await close();
  });

  it('by keyboard alone: a second grouping, never the first one again, shown with Enter and named in the address', async function () {
    const { page, problems, close } = await signedIn();
    await page.getByLabel('Group by').focus();
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('ArrowDown');
    expect(await page.getByLabel('Group by').inputValue()).to.equal('state');
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement.labels[0].textContent')).to.equal('Then by');
    // The first grouping is not offered again: the arrows pass over it (None, sid, s1, buyer).
    expect(await page.getByLabel('Then by').locator('option:disabled').allTextContents()).to.deep.equal(['State']);
    for (let i = 0; i < 3; i++) await page.keyboard.press('ArrowDown');
    expect(await page.getByLabel('Then by').inputValue()).to.equal('buyer');
    await page.keyboard.press('Tab');
    await page.keyboard.press('ArrowDown');
    expect(await page.getByLabel('Columns').inputValue()).to.equal('rejections');
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement.textContent')).to.equal('Show');
    await page.keyboard.press('Enter');
    await page.waitForURL((url) => /group_by=state,buyer&columns=rejections$/.test(url.hash));
    const query = new URLSearchParams({ from: await page.getByLabel('From', { exact: true }).inputValue(), to: await page.getByLabel('To', { exact: true }).inputValue(), tz: await page.getByLabel('Time zone').inputValue() });
    await page.locator('#report-table thead th', { hasText: 'Buyer' }).waitFor();
    expect(await shownTable(page)).to.deep.equal(wantedTable(await api(`${query}&group_by=state,buyer`), ['state', 'buyer'], 'rejections'));
    // A date field submits with Enter too.
    await page.getByLabel('Then by').selectOption('');
    await page.getByLabel('To', { exact: true }).press('Enter');
    await page.waitForURL((url) => /group_by=state&columns=rejections$/.test(url.hash));
    // Grouping first by what was the second: the second goes back to none rather than repeat it.
    await page.getByLabel('Then by').selectOption('sid');
    await page.getByLabel('Group by').selectOption('sid');
    expect(await page.getByLabel('Then by').inputValue()).to.equal('');
    expect(problems).to.deep.equal([]);
    await close();
  });

  it('an address the form cannot show is replaced by the default, said next to its field', async function () {
    const { page, problems, close } = await signedIn();
    const query = new URLSearchParams(dates());
    const note = (label: string) =>
      page.getByLabel(label, { exact: true }).evaluate((control) => ({
        text: control.ownerDocument.getElementById(control.getAttribute('aria-describedby') ?? '')?.textContent ?? null,
        invalid: control.getAttribute('aria-invalid'),
      }));
    const cases: Array<[string, string, string]> = [
      ['group_by=sid,nope', 'Group by', 'The address asked to group by “sid,nope”, which the report cannot: showing Source (sid).'],
      ['group_by=day', 'Group by', 'The address asked to group by “day”, which the report cannot: showing Source (sid).'],
      ['group_by=sid,s1,state', 'Group by', 'The address asked to group by “sid,s1,state”, more dimensions than the 2 the page shows: showing Source (sid).'],
      ['group_by=state,state', 'Group by', 'The address asked to group by “state,state”, the same dimension twice: showing Source (sid).'],
      ['group_by=buyer,state&columns=everything', 'Columns', 'The address asked for columns “everything”, which the table has not: showing Outcome.'],
    ];
    for (const [search, label, words] of cases) {
      await open(page, `${query}&${search}`);
      const shown = search.startsWith('group_by=buyer') ? 'buyer,state' : 'sid';
      await page.waitForURL((url) => url.hash === `#/report?${query}&group_by=${shown}`);
      expect(await note(label), search).to.deep.equal({ text: words, invalid: 'true' });
      expect(await page.getByLabel('Then by').inputValue()).to.equal(shown === 'sid' ? '' : 'state');
      expect(await page.locator('#report-table thead th').first().innerText()).to.equal(shown === 'sid' ? 'Source (sid)' : 'Buyer');
    }
    await page.screenshot({ path: join(SHOTS, 'report-address-replaced.png'), fullPage: true });
    // Other columns chosen: the note about the address goes.
    await page.getByLabel('Columns').selectOption('pings');
    expect(await note('Columns')).to.deep.equal({ text: null, invalid: null });
    expect(problems).to.deep.equal([]);
    await close();
  });

  it("at a phone's width each row of a report by two dimensions is a card, every cell on screen, in each set of columns", async function () {
    const { page, problems, close } = await signedIn({ width: 390, height: 844 });
    const query = new URLSearchParams(dates());
    const found: Record<string, unknown> = {};
    const wanted: Record<string, unknown> = {};
    for (const columns of ['outcome', 'rejections', 'pings']) {
      await open(page, `${query}&group_by=sid,s1&columns=${columns}`);
      await page.locator(`#report-table[data-columns="${columns}"]`).waitFor();
      // The page never wider than the window; each cell with something in it shown, whole, inside it.
      found[columns] = await page.evaluate(`(() => {
        const width = document.documentElement.clientWidth;
        const outside = [...document.querySelectorAll('#report-table td')].filter((td) => td.textContent !== '').filter((td) => {
          const r = td.getBoundingClientRect();
          return !td.checkVisibility() || r.width === 0 || r.left < -0.5 || r.right > width + 0.5;
        }).map((td) => td.dataset.field + ' ' + td.textContent);
        // The second dimension, a name as long as a click id may be, has a line of its own as the first has.
        const names = [...document.querySelectorAll('#report-table tbody tr')].filter((tr) => {
          const [first, second] = [...tr.querySelectorAll('td.name')].map((td) => td.getBoundingClientRect());
          return Math.abs(first.left - second.left) > 0.5 || Math.abs(first.width - second.width) > 0.5;
        }).length;
        return { page: [document.scrollingElement.scrollWidth, width], outside, cards: getComputedStyle(document.querySelector('#report-table tbody tr')).display, namesNotOnTheirOwnLine: names };
      })()`);
      wanted[columns] = { page: [390, 390], outside: [], cards: 'grid', namesNotOnTheirOwnLine: 0 };
      await page.screenshot({ path: join(SHOTS, `report-sid-s1-${columns}-phone.png`), fullPage: true });
    }
    expect(found).to.deep.equal(wanted);
    expect(problems).to.deep.equal([]);
    await close();
  });

  it("at a phone's width each chart's numbers are on screen whole, nothing to scroll sideways", async function () {
    const { page, problems, close } = await signedIn({ width: 390, height: 844 });
    const query = new URLSearchParams({ from: day(-6), to: day(0), tz: 'UTC' });
    await open(page, `${query}&group_by=sid`);
    for (const chart of ['chart-daily', 'chart-groups']) await page.locator(`#${chart}-numbers summary`).click();
    const found = await page.evaluate(`(() => {
      const width = document.documentElement.clientWidth;
      const tables = {};
      for (const chart of ['chart-daily', 'chart-groups']) {
        const table = document.querySelector('#' + chart + '-numbers table');
        const box = table.closest('.table-wrap');
        // Each cell with something in it, in sight and whole, inside the window and its box.
        const outside = [...table.querySelectorAll('tbody th, tbody td')].filter((cell) => {
          const r = cell.getBoundingClientRect();
          return !cell.checkVisibility() || r.width === 0 || r.left < -0.5 || r.right > width + 0.5;
        }).map((cell) => cell.textContent);
        tables[chart] = { scrolls: box.scrollWidth > box.clientWidth, outside, rows: table.tBodies[0].rows.length };
      }
      return { page: [document.scrollingElement.scrollWidth, width], tables };
    })()`);
    expect(found).to.deep.equal({
      page: [390, 390],
      tables: { 'chart-daily': { scrolls: false, outside: [], rows: 7 }, 'chart-groups': { scrolls: false, outside: [], rows: 3 } },
    });
    // Every value still under its heading, for whoever reads the card: Day, then each dataset's.
    expect(await page.locator('#chart-daily-numbers tbody tr').first().locator('td').evaluateAll((tds) => tds.map((td) => td.getAttribute('data-label')))).to.deep.equal(['Received', 'Accepted', 'Sold', 'Revenue (USD)']);
    await page.locator('#chart-daily-numbers').scrollIntoViewIfNeeded();
    await page.screenshot({ path: join(SHOTS, 'report-chart-numbers-phone.png'), fullPage: true });
    expect(problems).to.deep.equal([]);
    await close();
  });

  it('the CSV of a report by two dimensions is the API’s, its name saying both', async function () {
    const { page, problems, close } = await signedIn({ width: 1280, height: 800 }, { acceptDownloads: true });
    const query = new URLSearchParams(dates());
    await open(page, `${query}&group_by=state,sid&columns=rejections`);
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download CSV' }).click()]);
    const csv = await svc!.request('GET', `/functions/reports/summary?${query}&group_by=state,sid`, { 'x-api-key': analyst, accept: 'text/csv' });
    expect(csv.text.split('\r\n')[0]).to.match(/^state,sid,received,/);
    expect(readFileSync((await download.path())!, 'utf8')).to.equal(csv.text);
    expect(download.suggestedFilename()).to.equal(`leadpost-report-${query.get('from')}-${query.get('to')}-state-sid-UTC.csv`);
    expect(problems).to.deep.equal([]);
    await close();
  });

  it('the CSV is of the report shown, not of the form changed since and not yet shown', async function () {
    const { page, problems, close } = await signedIn({ width: 1280, height: 800 }, { acceptDownloads: true });
    const query = new URLSearchParams(dates());
    await open(page, `${query}&group_by=sid`);
    // Another grouping, other dates and another zone in the form, Show not pressed: the page still shows the report by source.
    await page.getByLabel('Group by').selectOption('state');
    await page.getByLabel('Then by').selectOption('buyer');
    await page.getByLabel('From', { exact: true }).fill(day(-30));
    await page.getByLabel('Time zone').selectOption('America/New_York');
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download CSV' }).click()]);
    const csv = await svc!.request('GET', `/functions/reports/summary?${query}&group_by=sid`, { 'x-api-key': analyst, accept: 'text/csv' });
    expect(csv.text.split('\r\n')[0]).to.match(/^sid,received,/);
    expect(readFileSync((await download.path())!, 'utf8')).to.equal(csv.text);
    expect(download.suggestedFilename()).to.equal(`leadpost-report-${query.get('from')}-${query.get('to')}-sid-UTC.csv`);
    expect(new URL(page.url()).hash).to.equal(`#/report?${query}&group_by=sid`);
    expect(problems).to.deep.equal([]);
    await close();
  });
});
