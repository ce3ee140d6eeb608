import { expect } from 'chai';
import { join } from 'node:path';
import { type Browser, type Page } from 'playwright-core';
import { launchChromium, signIn, skipWithoutChromium } from '../support/chromium.js';
import { seedLeads } from '../support/seed-leads.js';
import { TestService } from '../support/service.js';

// A report by click id over more rows than the page's table holds (10,000): the table stops there,
// but its Total row is the whole report's and the bars' top 20 are the report's biggest click ids,
// though every one of them sorts after the rows shown. The leads are written straight into the
// event store (posting 10,000 would take minutes). Screenshots go to SHOTS.

const SHOTS = 'test-results/console';
/** Click ids with one lead each: more than the table's 10,000 rows. */
const SINGLES = 10_200;
/** Twenty click ids after every single one in key order, with 21 to 40 leads each: the top 20. */
const BIG = Array.from({ length: 20 }, (_, i) => ({ s1: `zzz-${String(i).padStart(2, '0')}`, leads: 21 + i }));
const FIRST_LEAD = 1_000_000;

type Row = Record<string, string | number | null>;

describe('a report cut at 10,000 rows: its Total row is of every row, its bars say what they are of', function () {
  this.timeout(300_000);
  let svc: TestService | undefined;
  let browser: Browser | undefined;
  let analyst: string;
  let origin: string;
  const day = (days: number) => new Date(Date.now() + days * 86_400_000).toISOString().slice(0, 10);
  const dates = () => new URLSearchParams({ from: day(-1), to: day(1), tz: 'UTC' });

  before(async function () {
    skipWithoutChromium(this);
    svc = await TestService.start();
    origin = `https://127.0.0.1:${svc.port}`;
    analyst = await svc.key('analyst', 'ann');
    const s1s = [...Array.from({ length: SINGLES }, (_, i) => `click-${String(i).padStart(5, '0')}`), ...BIG.flatMap(({ s1, leads }) => Array.from({ length: leads }, () => s1))];
    const start = Date.now() - 60_000;
    await seedLeads(svc.service.store, {
      leads: s1s.length,
      firstLeadId: FIRST_LEAD,
      viaCodec: true,
      shape: { receivedAt: (n) => new Date(start + (n - FIRST_LEAD)), s1: (n) => s1s[n - FIRST_LEAD]! },
    });
    await svc.service.projections.waitFor(await svc.service.store.headPosition());
    browser = await launchChromium(SHOTS);
  });
  after(async () => {
    await browser?.close();
    await svc?.stop();
  });

  /** Every row of the API's report, page after page. */
  async function api(search: string): Promise<Row[]> {
    const rows: Row[] = [];
    let cursor: string | null = null;
    do {
      const reply = await svc!.request('GET', `/functions/reports/summary?${search}&limit=500${cursor ? `&cursor=${cursor}` : ''}`, { 'x-api-key': analyst });
      expect(reply.status, reply.text).to.equal(200);
      rows.push(...(reply.body.items as Row[]));
      cursor = reply.body.next_cursor as string | null;
    } while (cursor);
    return rows;
  }

  const sum = (rows: Row[], field: string) => Math.round(rows.reduce((s, row) => s + (row[field] as number), 0) * 100) / 100;

  /** The Total row's cells as the page writes them, and what the API's rows add up to, written alike. */
  async function totalRow(page: Page, rows: Row[]) {
    const cell = (field: string) => page.locator(`#report-totals [data-field="${field}"]`).innerText();
    const fields = ['received', 'accepted', 'sold', 'rejected', 'revenue'];
    const shown: Record<string, string> = {};
    const wanted: Record<string, string> = {};
    for (const field of fields) {
      shown[field] = await cell(field);
      wanted[field] = field === 'revenue' ? sum(rows, field).toFixed(2) : sum(rows, field).toLocaleString('en-US');
    }
    return { shown, wanted };
  }

  /** The bars as drawn: label, received and sold of each. */
  const bars = (page: Page) =>
    page.evaluate(`(() => {
      const { labels, datasets } = Chart.getChart(document.querySelector('#chart-groups canvas')).data;
      return labels.map((label, i) => [String(label), datasets[0].data[i], datasets[1].data[i]]);
    })()`) as Promise<Array<[string, number, number]>>;

  /** The top 20 values of the API's rows by one dimension alone, by received. */
  function top20(rows: Row[], dimension: string): Array<[string, number, number]> {
    return [...rows].sort((a, b) => (b.received as number) - (a.received as number)).slice(0, 20).map((row) => [String(row[dimension]), row.received as number, row.sold as number]);
  }

  for (const grouping of ['s1', 's1,state', 'sid,s1']) {
    it(`grouped by ${grouping}: 10,000 rows shown, and said; the Total row is the whole report's, the bars ${grouping === 'sid,s1' ? 'every source' : 'the biggest click ids of the first 10,000, and said'}`, async function () {
      const context = await browser!.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1280, height: 800 } });
      const page = await context.newPage();
      const problems: string[] = [];
      page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
      await signIn(page, origin, analyst);
      await page.waitForURL('**/console#/report');
      await page.goto(`${origin}/console#/report?${dates()}&group_by=${grouping}`);
      await page.locator('#report-status', { hasText: ' rows' }).waitFor();
      const rows = await api(`${dates()}&group_by=${grouping}`);
      expect(rows.length).to.be.greaterThan(10_000);
      expect(await page.locator('#report-table tbody tr').count()).to.equal(10_000);
      expect(await page.locator('#report-status').innerText()).to.contain('10,000 rows (first 10,000 shown');
      const { shown, wanted } = await totalRow(page, rows);
      expect(shown).to.deep.equal(wanted);
      // Every lead is in the report once: the totals are the seeded leads.
      expect(shown.received).to.equal((SINGLES + BIG.reduce((s, { leads }) => s + leads, 0)).toLocaleString('en-US'));
      if (grouping === 'sid,s1') {
        // By source first: the report by source alone, twenty sources, all of them drawn.
        const bySid = await api(`${dates()}&group_by=sid`);
        expect(bySid).to.have.length(20);
        expect(new Set(await bars(page))).to.deep.equal(new Set(top20(bySid, 'sid')));
        expect(await page.locator('#report-cut').innerText()).to.contain('its Total row is of every row, and so are the bars');
      } else {
        // By s1 first the bars' own report has a row per click id: they are the top of its first
        // 10,000 (in key order), and say so, rather than read a row per lead into the page.
        const firstRows = (await api(`${dates()}&group_by=s1`)).slice(0, 10_000);
        expect(await bars(page)).to.deep.equal(top20(firstRows, 's1'));
        expect(await page.locator('#chart-groups').locator('xpath=..').getByRole('heading').innerText()).to.equal('By click id (s1) (top 20 by received of the first 10,000)');
        expect(await page.locator('#report-cut').innerText()).to.contain('its Total row is of every row; the bars, as their title says, of the first rows by the first grouping');
      }
      await page.screenshot({ path: join(SHOTS, `report-cut-${grouping.replace(',', '-')}.png`) });
      expect(problems).to.deep.equal([]);
      await context.close();
    });
  }
});
