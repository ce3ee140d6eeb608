import { expect } from 'chai';
import { join } from 'node:path';
import { type Browser, type BrowserContext, type Page } from 'playwright-core';
import { launchChromium, signIn, skipWithoutChromium } from '../support/chromium.js';
import { TestService, validLead } from '../support/service.js';

// The report's table as an analyst reads it on a laptop: a column per metric, a row per click id.
// It never widens the page; where it does not fit, it scrolls inside its own box with the
// grouping's column, the headings and the totals kept in sight, so that a number is always read
// against its row and column. Screenshots go to SHOTS.

const SHOTS = 'test-results/console';
const LONG_BUYER = 'a-buyer-whose-id-is-as-long-as-the-routing-file-takes-0123456789';
const ROUTING = {
  buyers: [
    { id: 'ca-buyer', price: 40.07, states: ['CA'] },
    { id: LONG_BUYER, price: 33.33, states: ['WA'] },
  ],
  buckets: [{ id: 'unsold', default: true }],
};
/** Click ids as suppliers send them: some long, some with commas, quotes or a formula's first character. */
const S1 = ['=HYPERLINK("http://x","y")', 'a,b', 'say "hi"', `gclid.${'Cj0KCQiA2KitBhCIARIsAPPMEhL'.repeat(3)}`];
const ROWS = 40;

interface Layout {
  page: [number, number];
  box: { scrolls: boolean; height: number };
  /** Cells that should be in sight within the box and are not, in words. */
  hidden: string[];
}

/**
 * Where the table stands in the window, scrolled `to` a corner of its box: whether the page is wider
 * than the window, whether the box scrolls, and which of the cells that must stay in sight are not
 * whole inside the box — each row's first cell, the first heading and the totals' first cell,
 * and at the far right the last column's heading, cells and total. Run in the page.
 */
const LAYOUT = `(to) => {
  const table = document.getElementById('report-table');
  const box = table.parentElement;
  box.scrollLeft = to === 'right' ? box.scrollWidth : 0;
  box.scrollTop = to === 'right' ? (box.scrollHeight - box.clientHeight) / 2 : 0;
  const r = box.getBoundingClientRect();
  const inner = { left: r.left + box.clientLeft, top: r.top + box.clientTop, right: r.left + box.clientLeft + box.clientWidth, bottom: r.top + box.clientTop + box.clientHeight };
  const whole = (cell) => { const c = cell.getBoundingClientRect(); return c.left >= inner.left - 0.5 && c.right <= inner.right + 0.5; };
  const seen = (cell) => { const c = cell.getBoundingClientRect(); return whole(cell) && c.top >= inner.top - 0.5 && c.bottom <= inner.bottom + 0.5; };
  const hidden = [];
  const heads = [...table.tHead.rows[0].cells];
  for (const th of to === 'right' ? [heads[0], heads.at(-1)] : [heads[0]]) if (!seen(th)) hidden.push('heading ' + th.textContent);
  const total = table.tFoot.rows[0].cells;
  for (const td of to === 'right' ? [total[0], total[total.length - 1]] : [total[0]]) if (!seen(td)) hidden.push('total ' + td.textContent);
  for (const tr of table.tBodies[0].rows) {
    const c = tr.cells[0].getBoundingClientRect();
    // Rows scrolled out of the box's height are not looked at: the box scrolls that way too.
    if (c.bottom <= inner.top || c.top >= inner.bottom) continue;
    if (!whole(tr.cells[0])) hidden.push('row ' + tr.cells[0].textContent);
    if (to === 'right' && !whole(tr.cells[tr.cells.length - 1])) hidden.push('last column of ' + tr.cells[0].textContent);
  }
  const s = document.scrollingElement;
  return { page: [s.scrollWidth, s.clientWidth], box: { scrolls: box.scrollWidth > box.clientWidth, height: box.getBoundingClientRect().height }, hidden };
}`;

describe('the report table on a laptop', function () {
  this.timeout(120_000);
  let svc: TestService | undefined;
  let browser: Browser | undefined;
  let analyst: string;

  before(async function () {
    skipWithoutChromium(this);
    svc = await TestService.start({ routing: ROUTING });
    const supplier = await svc.key('supplier', 'sup-a');
    analyst = await svc.key('analyst', 'ann');
    for (let i = 0; i < ROWS; i++) {
      const state = i % 3 === 0 ? { accident_state: 'WA', zip: '98101' } : i % 3 === 1 ? { accident_state: 'CA' } : { accident_state: 'TX', zip: '75001' };
      const posted = await svc.post(validLead({ ...state, sid: `sid-${i % 4}`, s1: `${S1[i % S1.length]}-${i}` }), { 'x-api-key': supplier });
      expect(posted.body.ok, posted.text).to.equal(true);
    }
    await svc.service.projections.waitFor(await svc.service.store.headPosition());
    browser = await launchChromium(SHOTS);
  });
  after(async () => {
    await browser?.close();
    await svc?.stop();
  });

  /** The analyst signed in on a laptop's window, on the report page it opens at. */
  async function signedIn(): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser!.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    await signIn(page, `https://127.0.0.1:${svc!.port}`, analyst);
    await page.waitForURL('**/console#/report');
    return { context, page };
  }

  async function reportBy(page: Page, groupBy: string): Promise<void> {
    const day = (days: number) => new Date(Date.now() + days * 86_400_000).toISOString().slice(0, 10);
    await page.goto(`https://127.0.0.1:${svc!.port}/console#/report?from=${day(-1)}&to=${day(1)}&tz=UTC&group_by=${groupBy}`);
    await page.locator('#report-totals').waitFor();
  }

  it('fits a laptop window or scrolls in its own box, never the page, its first column, headings and totals in sight', async function () {
    const { context, page } = await signedIn();
    const found: Record<string, unknown> = {};
    const wanted: Record<string, unknown> = {};
    for (const groupBy of ['s1', 'buyer']) {
      await reportBy(page, groupBy);
      expect(await page.locator('#report-table tbody tr').count()).to.equal(groupBy === 's1' ? ROWS : 3);
      for (const viewport of [{ width: 1280, height: 800 }, { width: 1366, height: 768 }, { width: 1024, height: 768 }]) {
        await page.setViewportSize(viewport);
        const name = `${groupBy} at ${viewport.width}×${viewport.height}`;
        // Drawn afresh at this size: a chart follows a resize some frames later, and on a loaded
        // machine later than any fixed wait, which would measure the chart and not the table.
        await page.reload();
        await page.locator('#report-totals').waitFor();
        const left = (await page.evaluate(`(${LAYOUT})('left')`)) as Layout;
        const right = (await page.evaluate(`(${LAYOUT})('right')`)) as Layout;
        // A laptop's width shows every column at once; a narrower window scrolls the box sideways.
        found[name] = { page: left.page, scrolls: left.box.scrolls, fitsTheWindow: left.box.height <= viewport.height, hidden: [...left.hidden, ...right.hidden] };
        wanted[name] = { page: [viewport.width, viewport.width], scrolls: viewport.width < 1280, fitsTheWindow: true, hidden: [] };
        await page.screenshot({ path: join(SHOTS, `report-table-${groupBy}-${viewport.width}.png`), fullPage: true });
      }
      await page.setViewportSize({ width: 1280, height: 800 });
    }
    expect(found).to.deep.equal(wanted);
    // The box is a named region the keyboard can reach, to scroll it with the arrow keys.
    expect(await page.locator('#report-rows').evaluate((box) => [box.getAttribute('role'), box.tabIndex, box.getAttribute('aria-labelledby')])).to.deep.equal(['region', 0, 'table-title']);
    await context.close();
  });

  it('grouped by two dimensions, in each set of columns, the page never scrolls sideways at a laptop size and the table keeps its first column, headings and totals in sight', async function () {
    const { context, page } = await signedIn();
    const found: Record<string, unknown> = {};
    const wanted: Record<string, unknown> = {};
    // The longest names there are, a buyer's id and click ids, in both columns.
    for (const groupBy of ['buyer,s1', 's1,buyer']) {
      for (const columns of ['outcome', 'rejections', 'pings']) {
        await reportBy(page, `${groupBy}&columns=${columns}`);
        await page.locator(`#report-table[data-columns="${columns}"]`).waitFor();
        for (const viewport of [{ width: 1280, height: 800 }, { width: 1366, height: 768 }]) {
          await page.setViewportSize(viewport);
          const name = `${groupBy} ${columns} at ${viewport.width}×${viewport.height}`;
          // Drawn afresh at this size, as above.
          await page.reload();
          await page.locator(`#report-table[data-columns="${columns}"]`).waitFor();
          const left = (await page.evaluate(`(${LAYOUT})('left')`)) as Layout;
          const right = (await page.evaluate(`(${LAYOUT})('right')`)) as Layout;
          found[name] = { page: left.page, scrolls: left.box.scrolls, fitsTheWindow: left.box.height <= viewport.height, hidden: [...left.hidden, ...right.hidden] };
          wanted[name] = { page: [viewport.width, viewport.width], scrolls: false, fitsTheWindow: true, hidden: [] };
          await page.screenshot({ path: join(SHOTS, `report-table-${groupBy.replace(',', '-')}-${columns}-${viewport.width}.png`), fullPage: true });
        }
        await page.setViewportSize({ width: 1280, height: 800 });
      }
    }
    expect(found).to.deep.equal(wanted);
    await context.close();
  });

  it('a range longer than the service takes is said in words next to To, as the service counts it', async function () {
    const { context, page } = await signedIn();
    await page.locator('#report-totals').waitFor();
    const to = page.getByLabel('To', { exact: true });
    const note = () => to.evaluate((input) => input.ownerDocument.getElementById(input.getAttribute('aria-describedby') ?? '')?.textContent ?? null);
    // 366 days after From: shown. One more: refused, and the words say where the limit is.
    for (const [last, words] of [['2026-12-31', null], ['2027-01-01', 'To must be at most 366 days after From: bring them closer together.']] as const) {
      await page.getByLabel('From', { exact: true }).fill('2025-12-30');
      await to.fill(last);
      await page.getByRole('button', { name: 'Show', exact: true }).click();
      await page.locator('#report-status').filter({ hasText: words ? 'This report cannot be shown' : '2025-12-30 to 2026-12-31' }).waitFor();
      expect(await note(), last).to.equal(words);
    }
    await context.close();
  });

  it('opened from an address the service refuses claims no last report; a day no calendar has is replaced by the default, said so next to From', async function () {
    const { context, page } = await signedIn();
    const origin = `https://127.0.0.1:${svc!.port}`;
    const status = page.locator('#report-status');
    await page.goto(`${origin}/console#/report?from=2026-11-20&to=2026-11-10&tz=UTC&group_by=sid`);
    await status.filter({ hasText: 'This report cannot be shown' }).waitFor();
    // No report was shown on this page: nothing below is "the last report".
    expect(await status.innerText()).to.equal('This report cannot be shown: see the fields marked. No report is shown yet.');
    await page.screenshot({ path: join(SHOTS, 'report-refused-address.png'), fullPage: true });
    await context.close();

    const again = await signedIn();
    const today = new Date().toISOString().slice(0, 10);
    await again.page.goto(`${origin}/console#/report?from=2026-02-30&to=${today}&tz=UTC&group_by=sid`);
    await again.page.locator('#report-totals').waitFor();
    const from = again.page.getByLabel('From', { exact: true });
    const shownFrom = await from.inputValue();
    expect(shownFrom).to.match(/^\d{4}-\d\d-\d\d$/);
    const note = await from.evaluate((input) => input.ownerDocument.getElementById(input.getAttribute('aria-describedby') ?? '')?.textContent ?? null);
    expect(note).to.equal(`The address asked for From “2026-02-30”, which is not a date: showing ${shownFrom}.`);
    expect(new URL(again.page.url()).hash).to.contain(`from=${shownFrom}&`);
    await again.context.close();
  });

  it("the totals' rates and average are the totals' own; a rate with nothing to divide says so rather than 0", async function () {
    const { context, page } = await signedIn();
    await reportBy(page, 'buyer');
    const query = new URL(page.url()).hash.split('?')[1];
    const reply = await svc!.request('GET', `/functions/reports/summary?${query}&limit=500`, { 'x-api-key': analyst });
    const rows = reply.body.items as Array<Record<string, number | string | null>>;
    const total = (field: string) => rows.reduce((s, row) => s + (row[field] as number), 0);
    const cell = (row: string, field: string) => page.locator(`${row} [data-field="${field}"]`).innerText();
    const ratios = async (row: string) => ({ acceptance: await cell(row, 'acceptance_rate'), sell: await cell(row, 'sell_rate'), price: await cell(row, 'avg_price') });
    expect(await ratios('#report-totals')).to.deep.equal({
      acceptance: `${((total('accepted') / total('received')) * 100).toFixed(1)}%`,
      sell: `${((total('sold') / total('accepted')) * 100).toFixed(1)}%`,
      price: (Math.round((total('revenue') / total('sold')) * 100) / 100).toFixed(2),
    });
    // The unsold leads' row (no buyer): accepted, none sold; the API's avg_price is 0 there.
    const unsold = rows.find((row) => row.buyer === null)!;
    expect(unsold).to.include({ sold: 0, avg_price: 0, sell_rate: 0 });
    expect(await ratios('#report-table tbody tr:has(td:text-is("(none)"))')).to.deep.equal({ acceptance: '100.0%', sell: '0.0%', price: '—' });
    await context.close();
  });
});
