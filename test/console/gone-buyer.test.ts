import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Browser } from 'playwright-core';
import { launchChromium, signedInPage, skipWithoutChromium } from '../support/chromium.js';
import { TestService, validLead } from '../support/service.js';

// A buyer the routing file no longer names keeps the leads it was sold: they wait to be pulled, as
// a pull buyer's do (GET /functions/deliveries lists them, the ack takes them). The console gives
// such a buyer its Pulls page, not the note for a webhook buyer.

const SHOTS = 'test-results/console';
const WITH_BUYER = { buyers: [{ id: 'ny-pull', price: 40, states: ['NY'], delivery: { kind: 'pull' } }], buckets: [{ id: 'unsold', default: true }] };
const WITHOUT_BUYER = { buyers: [], buckets: [{ id: 'unsold', default: true }] };

describe('the console for a buyer the routing file no longer names', function () {
  this.timeout(120_000);
  let svc: TestService | undefined;
  let browser: Browser | undefined;
  let key: string;
  let leadId: number;

  before(async function () {
    skipWithoutChromium(this);
    svc = await TestService.start({ routing: WITH_BUYER });
    key = await svc.key('buyer', 'ny-pull');
    const supplier = await svc.key('supplier', 'sup-a');
    const sold = await svc.post(validLead({ accident_state: 'NY', zip: '10001' }), { 'x-api-key': supplier });
    expect(sold.body, sold.text).to.include({ code: 'SOLD' });
    leadId = sold.body.lead_id as number;
    writeFileSync(join(svc.dataDir, 'routing.json'), JSON.stringify(WITHOUT_BUYER));
    expect((await svc.service.reload()).routing).to.include({ changed: true });
    await svc.service.projections.waitFor(await svc.service.store.headPosition());
    browser = await launchChromium(SHOTS);
  });
  after(async () => {
    await browser?.close();
    await svc?.stop();
  });

  it('has its Pulls page, lists the lead it was sold and acknowledges it', async function () {
    expect((await svc!.request('GET', '/functions/me', { 'x-api-key': key })).body.buyer).to.equal(null);
    const page = await signedInPage(browser!, `https://127.0.0.1:${svc!.port}`, key);
    expect(await page.locator('#nav a:visible').allInnerTexts()).to.include('Pulls');
    await page.getByRole('link', { name: 'Pulls' }).click();
    const row = page.locator(`#pulls-table tr[data-lead="${leadId}"]`);
    await row.waitFor();
    await page.screenshot({ path: join(SHOTS, 'gone-buyer-pulls.png'), fullPage: true });
    await row.getByRole('button', { name: 'Acknowledge' }).click();
    await row.waitFor({ state: 'detached' });
    const deliveries = await svc!.request('GET', '/functions/deliveries?status=delivered', { 'x-api-key': key });
    expect((deliveries.body.items as Array<{ lead_id: number }>).map((item) => item.lead_id)).to.deep.equal([leadId]);
    await page.context().close();
  });
});
