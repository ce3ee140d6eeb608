import { expect } from 'chai';
import { type Browser } from 'playwright-core';
import { launchChromium, signIn, skipWithoutChromium } from '../support/chromium.js';
import { BuyerEndpoint } from '../delivery/buyer-endpoint.js';
import { DeliveryHarness, HOOK_BUYER, until } from '../delivery/harness.js';

// The console's deliveries page for an erased lead whose `lead.erased` notice failed for good: an
// admin sends the notice again with the row's button, as a failed delivery is sent again, and the
// lead's timeline says who asked.

describe("the console: an erased lead's notice that failed for good, sent again", function () {
  this.timeout(120_000);
  let endpoint: BuyerEndpoint;
  let harness: DeliveryHarness;
  let browser: Browser | undefined;
  /** While set, the buyer answers every notice 503: it is down. Leads are always taken. */
  let down = true;

  before(async function () {
    skipWithoutChromium(this);
    endpoint = await BuyerEndpoint.start((request) => (request.body.type === 'lead.erased' && down ? 503 : 200));
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
});
