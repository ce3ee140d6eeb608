import { expect } from 'chai';
import { join } from 'node:path';
import { type Browser, type Page } from 'playwright-core';
import { launchChromium, signedInPage, skipWithoutChromium } from '../support/chromium.js';
import { TestService, validLead } from '../support/service.js';

// A list with nothing in it says so in words, with its heading and filters still there to change
// what is asked: never a table's headings over no row. Each list page, as its role sees it.
// Screenshots go to SHOTS.

const SHOTS = 'test-results/console';
const ROUTING = {
  buyers: [
    { id: 'ca-buyer', price: 40, states: ['CA'] },
    // Buys only in a state no lead of this test comes from: nothing bought, nothing to pull.
    { id: 'idle-buyer', price: 30, states: ['NY'] },
  ],
  buckets: [{ id: 'unsold', default: true }],
};

/** What a list page shows: its heading, whether its filters and its table are shown, and its status line. */
async function shown(page: Page, table: string, status: string): Promise<Record<string, unknown>> {
  const line = page.locator(status);
  await line.filter({ hasText: /\S/ }).filter({ hasNotText: 'Loading' }).waitFor();
  return {
    heading: await page.locator('main h1').innerText(),
    filters: await page.locator('main form.filters').first().isVisible(),
    table: await page.locator(table).isVisible(),
    headings: await page.locator(`${table} thead th`).first().isVisible(),
    status: await line.innerText(),
  };
}

describe('an empty list in the console', function () {
  this.timeout(120_000);
  let svc: TestService | undefined;
  let browser: Browser | undefined;
  const keys: Record<string, string> = {};

  before(async function () {
    skipWithoutChromium(this);
    svc = await TestService.start({ routing: ROUTING });
    keys.supplier = await svc.key('supplier', 'sup-a');
    keys.newSupplier = await svc.key('supplier', 'sup-new');
    keys.analyst = await svc.key('analyst', 'ann');
    keys.admin = await svc.key('admin', 'root');
    keys.idleBuyer = await svc.key('buyer', 'idle-buyer');
    const posted = await svc.post(validLead({ sid: 'google' }), { 'x-api-key': keys.supplier });
    expect(posted.body, posted.text).to.include({ code: 'SOLD' });
    await svc.service.projections.waitFor(await svc.service.store.headPosition());
    browser = await launchChromium(SHOTS);
  });
  after(async () => {
    await browser?.close();
    await svc?.stop();
  });

  const signedIn = (key: string, hash: string): Promise<Page> => signedInPage(browser!, `https://127.0.0.1:${svc!.port}`, key, { hash });

  it('deliveries: a status that matches none says so, and the table comes back with the rows', async function () {
    const page = await signedIn(keys.analyst!, '#/deliveries');
    await page.locator('#deliveries-table tbody tr').first().waitFor();
    await page.getByLabel('Status').selectOption('failed');
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    await page.locator('#deliveries-message', { hasText: 'No failed deliveries.' }).waitFor();
    expect(await shown(page, '#deliveries-table', '#deliveries-message')).to.deep.equal({
      heading: 'Deliveries', filters: true, table: false, headings: false, status: 'No failed deliveries.',
    });
    await page.screenshot({ path: join(SHOTS, 'empty-deliveries.png'), fullPage: true });
    await page.getByLabel('Status').selectOption('');
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    await page.locator('#deliveries-message', { hasText: '1 delivery shown.' }).waitFor();
    expect(await page.locator('#deliveries-table').isVisible()).to.equal(true);
    await page.context().close();
  });

  it('leads: a supplier with none says so over its dates', async function () {
    const page = await signedIn(keys.newSupplier!, '#/leads');
    const found = await shown(page, '#leads-table', '#leads-message');
    expect(found).to.deep.include({ heading: 'Your leads', filters: true, table: false, headings: false });
    expect(found.status).to.match(/^No leads from \d{4}-\d\d-\d\d to \d{4}-\d\d-\d\d \(UTC\)\.$/);
    await page.screenshot({ path: join(SHOTS, 'empty-leads.png'), fullPage: true });
    // A filter that matches none of an analyst's leads says it is the filters.
    await page.context().close();
    const analyst = await signedIn(keys.analyst!, '#/leads');
    await analyst.locator('#leads-table tbody tr').first().waitFor();
    await analyst.getByLabel('Source (sid)').fill('nowhere');
    await analyst.getByRole('button', { name: 'Show', exact: true }).click();
    await analyst.locator('#leads-message', { hasText: 'with these filters.' }).waitFor();
    expect(await analyst.locator('#leads-table').isVisible()).to.equal(false);
    await analyst.context().close();
  });

  it('a buyer with nothing bought and nothing to pull: both pages say so', async function () {
    const page = await signedIn(keys.idleBuyer!, '#/pulls');
    expect(await shown(page, '#pulls-table', 'main [role="status"]')).to.deep.equal({
      heading: 'Pending pulls', filters: false, table: false, headings: false, status: 'No pending pulls: no lead sold to you is waiting to be taken.',
    });
    await page.screenshot({ path: join(SHOTS, 'empty-pulls.png'), fullPage: true });
    await page.goto(`https://127.0.0.1:${svc!.port}/console#/bought`);
    expect(await shown(page, '#bought-table', '#bought-message')).to.deep.equal({
      heading: 'Bought leads', filters: false, table: false, headings: false, status: 'No leads bought yet.',
    });
    await page.context().close();
  });

  it('erasures: none recorded says so', async function () {
    const page = await signedIn(keys.admin!, '#/personal-data');
    expect(await shown(page, '#erasures-table', '#erasures-message')).to.deep.equal({
      heading: 'Personal data', filters: true, table: false, headings: false, status: 'No erasure yet.',
    });
    await page.screenshot({ path: join(SHOTS, 'empty-erasures.png'), fullPage: true });
    await page.context().close();
  });
});
