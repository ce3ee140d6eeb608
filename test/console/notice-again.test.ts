import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Browser, type Page } from 'playwright-core';
import { launchChromium, signIn, skipWithoutChromium } from '../support/chromium.js';
import { BuyerEndpoint } from '../delivery/buyer-endpoint.js';
import { DeliveryHarness, HOOK_BUYER, deliveryRouting, until } from '../delivery/harness.js';

// The console's deliveries page for an erased lead whose `lead.erased` notice failed for good: an
// admin sends the notice again with the row's button, as a failed delivery is sent again, and the
// lead's timeline says who asked. A Send again pressed on a row drawn before the consumer was
// erased, or before its buyer switched to pull, says what the service re-opened, not what the row
// once showed.

describe("the console: an erased lead's notice that failed for good, sent again", function () {
  this.timeout(120_000);
  let endpoint: BuyerEndpoint;
  let harness: DeliveryHarness;
  let browser: Browser | undefined;
  /** While set, the buyer answers every notice 503: it is down. */
  let down = true;
  /** While set, the buyer answers every lead 503 too. */
  let refusingLeads = false;

  before(async function () {
    skipWithoutChromium(this);
    endpoint = await BuyerEndpoint.start((request) => ((request.body.type === 'lead.erased' ? down : refusingLeads) ? 503 : 200));
    harness = await DeliveryHarness.start(endpoint, { max_attempts: 2 });
    harness.worker();
    browser = await launchChromium();
  });

  after(async function () {
    await browser?.close();
    await harness?.stop();
    await endpoint?.stop();
  });

  it('has a Send notice again button, which re-opens the notice: the buyer takes it, and the timeline says who sent it again', async function () {
    const admin = await harness.svc.key('admin', 'ops');
    const { leadId, lead } = await harness.sell({ zip: '90210' });
    await harness.rowWith(leadId, 'delivered');
    const erased = await harness.svc.post({ email: lead.email }, { 'x-api-key': admin }, '/functions/erasures');
    expect(erased.status, erased.text).to.equal(201);
    await until(async () => (await harness.row(leadId))?.notice === 'failed', 15_000, () => 'the notice given up');

    const origin = `https://127.0.0.1:${harness.svc.port}`;
    const page = await (await browser!.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1280, height: 800 } })).newPage();
    await signIn(page, origin, admin);
    await page.locator('#nav a').first().waitFor();
    await page.goto(`${origin}/console#/deliveries`);
    const row = page.locator(`#deliveries-table tr[data-lead="${leadId}"]`);
    await row.waitFor();
    // Delivered, and erased since: the lead is never sent again, its notice is.
    expect(await row.locator('td').nth(3).innerText()).to.equal('Delivered Send notice again');

    down = false;
    await row.getByRole('button', { name: `Send the erasure notice of lead ${leadId} again` }).click();
    await page.locator('#deliveries-message', { hasText: `The erasure notice of lead ${leadId} is sent again: due ` }).waitFor();
    expect(await page.locator(`#deliveries-table tr[data-lead="${leadId}"]`).getByRole('button').count(), 'no button once re-opened').to.equal(0);
    await until(async () => (await harness.ofType(leadId, 'ErasureNoticeSent')).length === 1, 15_000, () => 'the notice sent again');
    expect(endpoint.forLead(leadId).filter((r) => r.body.type !== 'lead.erased'), 'the lead itself, once').to.have.length(1);

    await page.goto(`${origin}/console#/leads/${leadId}`);
    const again = page.locator('#timeline [data-type="ErasureNoticeRedeliveryRequested"]');
    await again.waitFor();
    expect(await again.innerText()).to.contain('Erasure notice sent again').and.contain(`Erasure notice sent again to ${HOOK_BUYER} (round 2, after 2 attempts), asked by ops.`);
    await page.context().close();
  });
  /** An admin's deliveries page listing the failed ones, with lead `leadId`'s row on it. */
  async function failedList(admin: string, leadId: number): Promise<Page> {
    const origin = `https://127.0.0.1:${harness.svc.port}`;
    const page = await (await browser!.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1280, height: 800 } })).newPage();
    await signIn(page, origin, admin);
    await page.locator('#nav a').first().waitFor();
    await page.goto(`${origin}/console#/deliveries`);
    await page.locator('#deliveries-message', { hasText: /shown/ }).waitFor();
    await page.getByLabel('Status').selectOption('failed');
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    await page.locator(`#deliveries-table tr[data-lead="${leadId}"]`).waitFor();
    return page;
  }

  it('Send again on a row drawn before its consumer was erased says that the erasure notice is sent again, not the lead', async function () {
    const admin = await harness.svc.key('admin', 'ops-2');
    down = true;
    refusingLeads = true;
    const { leadId, lead } = await harness.sell({ zip: '90211' });
    await harness.rowWith(leadId, 'failed', 15_000);
    const page = await failedList(admin, leadId);
    const row = page.locator(`#deliveries-table tr[data-lead="${leadId}"]`);
    // Drawn before the erasure: a failed delivery, its button Send again.
    expect(await row.locator('td').nth(3).innerText()).to.equal('Failed Send again');

    const erased = await harness.svc.post({ email: lead.email }, { 'x-api-key': admin }, '/functions/erasures');
    expect(erased.status, erased.text).to.equal(201);
    await until(async () => (await harness.row(leadId))?.notice === 'failed', 15_000, () => 'the notice given up');
    await row.getByRole('button', { name: `Send lead ${leadId} again` }).click();
    const message = page.locator('#deliveries-message');
    await message.filter({ hasText: `The erasure notice of lead ${leadId} is sent again: due ` }).waitFor();
    expect(await message.innerText()).to.match(/: due \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\. The lead itself is not: its personal data is erased\.$/);
    expect(await page.locator(`#deliveries-table tr[data-lead="${leadId}"] td`).first().innerText()).to.equal(`${leadId} erased`);
    await page.screenshot({ path: 'test-results/console/sendagain-erased-since.png', fullPage: true });
    await page.context().close();
    refusingLeads = false;
  });

  it("Send again on a lead whose buyer switched to pull since it failed: pending for the buyer to pull, no next attempt shown", async function () {
    const admin = await harness.svc.key('admin', 'ops-3');
    refusingLeads = true;
    const { leadId } = await harness.sell({ zip: '90212' });
    await harness.rowWith(leadId, 'failed', 15_000);
    // The buyer takes its leads by pull from now on; no worker of this test sends anything since.
    await harness.stopWorkers();
    const routing = deliveryRouting(endpoint.url) as { buyers: Array<{ id: string; delivery: unknown }> };
    routing.buyers.find((b) => b.id === HOOK_BUYER)!.delivery = { kind: 'pull' };
    writeFileSync(join(harness.svc.dataDir, 'routing.json'), JSON.stringify(routing));
    expect((await harness.svc.service.reload()).routing).to.include({ changed: true });

    const page = await failedList(admin, leadId);
    const row = page.locator(`#deliveries-table tr[data-lead="${leadId}"]`);
    await row.getByRole('button', { name: `Send lead ${leadId} again` }).click();
    const message = page.locator('#deliveries-message');
    await message.filter({ hasText: `Lead ${leadId} is pending again, for its buyer to pull and acknowledge: no worker sends it.` }).waitFor();
    const cells = page.locator(`#deliveries-table tr[data-lead="${leadId}"] td`);
    expect(await cells.nth(2).innerText()).to.equal('pull');
    expect(await cells.nth(3).innerText()).to.equal('Pending');
    // Its webhook attempts are from before: no worker makes a next one.
    expect(await cells.nth(7).innerText(), 'Next attempt').to.equal('');
    await page.getByLabel('Status').selectOption('pending');
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    await page.locator('#deliveries-message', { hasText: /shown/ }).waitFor();
    expect(await page.locator(`#deliveries-table tr[data-lead="${leadId}"] td`).nth(7).innerText(), 'Next attempt, listed pending').to.equal('');
    await page.screenshot({ path: 'test-results/console/sendagain-pull-since.png', fullPage: true });
    await page.context().close();
  });
});
