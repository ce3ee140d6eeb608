import { expect } from 'chai';
import { join } from 'node:path';
import { type Browser, type Page, type Request, type Route } from 'playwright-core';
import { launchChromium, signedInPage, skipWithoutChromium } from '../support/chromium.js';
import { TestService, leadWith, testMobile } from '../support/service.js';

// The console pressed twice before the first answer comes: a More double-clicked adds its page
// once, two Finds draw the second one's consumer only, a report's Show overtaken by a later one
// is not drawn over it, and a button that sends something (Return, Acknowledge) sends it once. The
// service answers as usual; only the browser holds one request back for a while (page.route), as
// a slow answer at volume would be. Screenshots go to SHOTS.

const SHOTS = 'test-results/console';
const ROUTING = {
  buyers: [{ id: 'ca-buyer', price: 40, states: ['CA'], return_reasons: ['bad_phone', 'fraud'] }],
  buckets: [{ id: 'unsold', default: true }],
};
/** More leads than a page of the leads, deliveries, bought and pulls lists (50). */
const LEADS = 62;
/** More erasures than a page of their list (20). */
const ERASURES = 23;
const email = (i: number) => `twice.${i}@example.com`;
const day = (days: number) => new Date(Date.now() + days * 86_400_000).toISOString().slice(0, 10);
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Holds back, for `ms`, the browser's requests that `matches`, then lets them go on to the service;
 * one the page withdrew meanwhile (aborted) is left withdrawn. Returns the requests seen.
 */
async function slow(page: Page, matches: (request: Request) => boolean, ms: number): Promise<Request[]> {
  const seen: Request[] = [];
  await page.route('**/functions/**', async (route: Route) => {
    if (!matches(route.request())) return route.fallback();
    seen.push(route.request());
    await pause(ms);
    await route.continue().catch(() => undefined);
  });
  return seen;
}

describe('the console pressed twice while its first request is on its way', function () {
  this.timeout(180_000);
  let svc: TestService | undefined;
  let browser: Browser | undefined;
  let origin: string;
  const keys: Record<string, string> = {};
  const leads: number[] = [];

  before(async function () {
    skipWithoutChromium(this);
    svc = await TestService.start({ routing: ROUTING });
    origin = `https://127.0.0.1:${svc.port}`;
    keys.supplier = await svc.key('supplier', 'sup-a');
    keys.analyst = await svc.key('analyst', 'ann');
    keys.buyer = await svc.key('buyer', 'ca-buyer');
    keys.admin = await svc.key('admin', 'root');
    for (let i = 0; i < LEADS; i += 10) {
      const replies = await Promise.all(
        Array.from({ length: Math.min(10, LEADS - i) }, (_, k) => svc!.post(leadWith(email(i + k), testMobile(7000 + i + k), { sid: `src-${(i + k) % 3}`, s1: `c-${i + k}` }), { 'x-api-key': keys.supplier! })),
      );
      for (const reply of replies) {
        expect(reply.body.code, reply.text).to.equal('SOLD');
        leads.push(reply.body.lead_id as number);
      }
    }
    // Erasures of consumers with no lead here: each recorded all the same.
    for (let i = 0; i < ERASURES; i++) {
      const reply = await svc.post({ email: `nobody.${i}@example.com` }, { 'x-api-key': keys.admin }, '/functions/erasures');
      expect(reply.status, reply.text).to.equal(201);
    }
    await svc.service.projections.waitFor(await svc.service.store.headPosition());
    browser = await launchChromium(SHOTS);
  });
  after(async () => {
    await browser?.close();
    await svc?.stop();
  });

  const signedIn = (key: string, hash: string): Promise<Page> => signedInPage(browser!, origin, key, { hash });

  const ids = (page: Page, rows: string, attribute: string) => page.locator(rows).evaluateAll((trs, name) => trs.map((tr) => tr.getAttribute(name)), attribute);

  const lists = [
    { name: 'Leads', key: 'analyst', hash: '#/leads', rows: '#leads-table tbody tr', id: 'data-lead', path: '/functions/leads?', total: LEADS, says: `${LEADS} leads shown.` },
    { name: 'Deliveries', key: 'analyst', hash: '#/deliveries', rows: '#deliveries-table tbody tr', id: 'data-lead', path: '/functions/deliveries?', total: LEADS, says: `${LEADS} deliveries shown.` },
    { name: 'Bought', key: 'buyer', hash: '#/bought', rows: '#bought-table tbody tr', id: 'data-lead', path: '/functions/leads?', total: LEADS, says: `${LEADS} leads shown.` },
    { name: 'Pulls', key: 'buyer', hash: '#/pulls', rows: '#pulls-table tbody tr', id: 'data-lead', path: '/functions/deliveries?', total: LEADS, says: `${LEADS} pending pulls shown.` },
    { name: 'Erasures', key: 'admin', hash: '#/personal-data', rows: '#erasures-table tbody tr', id: 'data-erasure', path: '/functions/erasures?', total: ERASURES, says: `${ERASURES} requests shown, the newest first.` },
  ] as const;

  for (const list of lists) {
    it(`${list.name}: More double-clicked asks for the next page once and adds it once; the count is of rows, each once`, async function () {
      const page = await signedIn(keys[list.key]!, list.hash);
      const rows = page.locator(list.rows);
      await rows.nth(list.total >= 50 ? 49 : 19).waitFor();
      const more = page.getByRole('button', { name: 'More', exact: true });
      await more.waitFor();
      const asked = await slow(page, (request) => request.url().includes(list.path) && request.url().includes('cursor='), 400);
      await more.dblclick();
      await more.waitFor({ state: 'hidden' });
      // Time for a second answer to be drawn, had there been a second request.
      await pause(600);
      const shown = await ids(page, list.rows, list.id);
      expect(new Set(shown).size, `${list.name}: distinct rows`).to.equal(shown.length);
      expect(shown, list.name).to.have.length(list.total);
      expect(asked, `${list.name}: requests for the next page`).to.have.length(1);
      const status = page.getByRole('status').filter({ hasText: 'shown' }).first();
      expect(await status.innerText()).to.equal(list.says);
      await page.screenshot({ path: join(SHOTS, `twice-more-${list.name.toLowerCase()}.png`), fullPage: true });
      await page.context().close();
    });
  }

  it('Leads: a More pressed while a Show is on its way adds nothing to the list that Show replaces', async function () {
    const page = await signedIn(keys.analyst!, '#/leads');
    const message = page.locator('#leads-message');
    await message.filter({ hasText: `50 leads shown (more with the button below the table).` }).waitFor();
    // The Show for src-1's leads held back; More pressed meanwhile, on the list of every lead, its
    // answer (were it asked) held back longer, to come after the Show's.
    const nextPages = await slow(page, (request) => request.url().includes('/functions/leads?') && request.url().includes('cursor='), 900);
    const held = await slow(page, (request) => request.url().includes('/functions/leads?') && request.url().includes('sid=src-1'), 300);
    await page.getByLabel('Source (sid)').fill('src-1');
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    await page.getByRole('button', { name: 'More', exact: true }).click();
    await message.filter({ hasText: /^\d+ leads shown\.$/ }).waitFor();
    await pause(1200);
    const expected = leads.filter((_, i) => i % 3 === 1).length;
    const shown = await ids(page, '#leads-table tbody tr', 'data-lead');
    expect(held).to.have.length(1);
    expect(nextPages, 'a next page asked for').to.have.length(0);
    expect(new Set(shown).size).to.equal(shown.length);
    expect(await message.innerText()).to.equal(`${expected} leads shown.`);
    expect(shown).to.have.members(leads.filter((_, i) => i % 3 === 1).map(String));
    await page.context().close();
  });
  it("Find a consumer: of two Finds on their way, only the later one's consumer is listed; a Find double-clicked lists its leads once", async function () {
    const page = await signedIn(keys.admin!, '#/personal-data');
    await page.locator('#erasures-message').filter({ hasText: 'shown' }).waitFor();
    const lookup = (of: string) => (request: Request) => request.url().includes('/functions/consumers/lookup') && (request.postData() ?? '').includes(of);
    const message = page.locator('#consumer-message');
    const mail = page.getByLabel('E-mail').first();
    const find = page.getByRole('button', { name: 'Find', exact: true });

    // The first consumer's answer held back: it would come after the second's.
    const first = await slow(page, lookup(email(1)), 800);
    await mail.fill(email(1));
    await find.click();
    await mail.fill(email(2));
    await find.click();
    await message.filter({ hasText: 'lead(s) of this consumer.' }).waitFor();
    await pause(1200);
    expect(first, 'the first Find asked').to.have.length(1);
    expect(await ids(page, '#consumer-leads tbody tr', 'data-lead')).to.deep.equal([String(leads[2])]);
    expect(await page.locator('#consumer-leads tbody').innerText()).to.contain(email(2)).and.not.contain(email(1));
    expect(await message.innerText()).to.equal('1 lead(s) of this consumer.');
    await page.screenshot({ path: join(SHOTS, 'twice-find-two-consumers.png'), fullPage: true });

    // Double-clicked: the first withdrawn, the second's answer listed once.
    const both = await slow(page, lookup(email(3)), 400);
    await mail.fill(email(3));
    await find.dblclick();
    await message.filter({ hasText: 'lead(s) of this consumer.' }).waitFor();
    await pause(800);
    expect(both.length, 'Finds sent').to.be.at.least(1);
    expect(await ids(page, '#consumer-leads tbody tr', 'data-lead')).to.deep.equal([String(leads[3])]);
    expect(await message.innerText()).to.equal('1 lead(s) of this consumer.');
    expect(await message.getAttribute('class')).to.equal('muted');
    expect(await page.locator('#main').evaluate((el) => el.classList.contains('stale')), 'marked out of date').to.equal(false);
    await page.context().close();
  });

  it('Report: a Show overtaken by a later one is not drawn over it, nor named in the address', async function () {
    const range = `${day(-1)} to ${day(1)} in UTC`;
    const page = await signedIn(keys.analyst!, `#/report?from=${day(-1)}&to=${day(1)}&tz=UTC&group_by=sid`);
    const status = page.locator('#report-status');
    await status.filter({ hasText: `3 rows, ${range}.` }).waitFor();
    // The report by click id held back (at volume it takes seconds); by state asked for meanwhile.
    const held = await slow(page, (request) => request.url().includes('/functions/reports/summary') && request.url().includes('group_by=s1'), 1500);
    const show = page.getByRole('button', { name: 'Show', exact: true });
    await page.getByLabel('Group by').selectOption('s1');
    await show.click();
    await page.getByLabel('Group by').selectOption('state');
    await show.click();
    await status.filter({ hasText: `1 rows, ${range}.` }).waitFor();
    // Past the time the report by click id would have been drawn.
    await pause(2500);
    expect(held.length, 'the report by click id asked').to.be.at.least(1);
    expect(await status.innerText()).to.equal(`1 rows, ${range}. Test leads are left out.`);
    expect(await status.getAttribute('class')).to.equal('muted');
    expect(new URL(page.url()).hash).to.equal(`#/report?from=${day(-1)}&to=${day(1)}&tz=UTC&group_by=state`);
    expect(await page.locator('#report-table thead th').first().innerText()).to.equal('State');
    expect(await page.locator('#chart-groups').locator('xpath=..').locator('h2').innerText()).to.equal('By state');
    expect(await page.getByLabel('Group by').inputValue()).to.equal('state');
    // The Show withdrawn is no failure of the connection: nothing marked out of date.
    expect(await page.locator('#main').evaluate((el) => el.classList.contains('stale')), 'marked out of date').to.equal(false);
    expect(await page.locator('#readiness-state').innerText()).to.equal('Ready');
    await page.screenshot({ path: join(SHOTS, 'twice-report-overtaken.png'), fullPage: true });
    await page.context().close();
  });
  it("a buyer's Return double-clicked: one return sent, and the page says it is returned, not refused", async function () {
    const lead = leads[10]!;
    const page = await signedIn(keys.buyer!, `#/leads/${lead}`);
    await page.getByLabel('Reason').selectOption('bad_phone');
    const sent = await slow(page, (request) => request.method() === 'POST' && request.url().includes(`/functions/leads/${lead}/feedback`), 400);
    await page.getByRole('button', { name: 'Return', exact: true }).dblclick();
    const answer = page.locator('#return-answer');
    await answer.filter({ hasText: /^Returned/ }).waitFor();
    // Time for a second answer to replace the first, had there been a second request.
    await pause(800);
    expect(sent, 'returns sent').to.have.length(1);
    expect(await answer.innerText()).to.equal("Returned (bad phone). The sale's revenue is reversed in the reports.");
    expect(await answer.getAttribute('class')).to.equal('wide ok');
    // Done: a later click cannot send a second return, nor turn the answer into a refusal.
    const submit = page.getByRole('button', { name: 'Return', exact: true });
    expect(await submit.isDisabled(), 'Return disabled once returned').to.equal(true);
    expect(await page.getByLabel('Reason').isDisabled(), 'the reason disabled once returned').to.equal(true);
    await submit.click({ force: true });
    await pause(800);
    expect(sent, 'returns sent after a later click').to.have.length(1);
    expect(await answer.getAttribute('class')).to.equal('wide ok');
    await page.screenshot({ path: join(SHOTS, 'twice-return.png'), fullPage: true });
    await page.context().close();
  });

  it("a buyer's Acknowledge double-clicked: acknowledged once, no refusal shown", async function () {
    const page = await signedIn(keys.buyer!, '#/pulls');
    const first = page.locator('#pulls-table tbody tr').first();
    await first.waitFor();
    const lead = await first.getAttribute('data-lead');
    const sent = await slow(page, (request) => request.method() === 'POST' && request.url().includes(`/functions/deliveries/${lead}/ack`), 400);
    await first.getByRole('button', { name: `Acknowledge lead ${lead}` }).dblclick();
    const message = page.getByRole('status').filter({ hasText: `Lead ${lead}` });
    await message.waitFor();
    await pause(800);
    expect(sent, 'acknowledgements sent').to.have.length(1);
    expect(await message.innerText()).to.match(new RegExp(`^Lead ${lead} acknowledged: delivered `));
    expect(await message.getAttribute('class')).to.equal('muted');
    expect(await page.locator(`#pulls-table tr[data-lead="${lead}"]`).count()).to.equal(0);
    await page.context().close();
  });
  it('Report: Download CSV double-clicked asks for the report once and downloads it once', async function () {
    const page = await signedIn(keys.analyst!, `#/report?from=${day(-1)}&to=${day(1)}&tz=UTC&group_by=sid`);
    await page.locator('#report-status').filter({ hasText: 'rows' }).waitFor();
    const asked = await slow(page, (request) => request.url().includes('/functions/reports/summary') && request.headers().accept === 'text/csv', 400);
    const downloads: string[] = [];
    page.on('download', (download) => downloads.push(download.suggestedFilename()));
    await page.getByRole('button', { name: 'Download CSV', exact: true }).dblclick();
    await page.waitForEvent('download');
    await pause(800);
    expect(asked, 'CSVs asked for').to.have.length(1);
    expect(downloads).to.deep.equal([`leadpost-report-${day(-1)}-${day(1)}-sid-UTC.csv`]);
    await page.context().close();
  });
});
