import { expect } from 'chai';
import { mkdirSync } from 'node:fs';
import { type Browser } from 'playwright-core';
import { launchChromium, skipWithoutChromium } from '../support/chromium.js';
import { TestService, validLead } from '../support/service.js';

// A lead posted with a ping, on the console's lead page in a real browser: the summary names the
// ping and the bid it sold at, and the timeline starts with the ping's events, every buyer's bid
// in a table, before the lead's own.

describe('the console: a lead posted with a ping', function () {
  this.timeout(120_000);
  let svc: TestService | undefined;
  let browser: Browser | undefined;

  before(async function () {
    skipWithoutChromium(this);
    svc = await TestService.start({
      routing: {
        buyers: [
          { id: 'ca-buyer', price: 40, states: ['CA'], ping: { kind: 'static' } },
          { id: 'ny-buyer', price: 55, states: ['NY'], ping: { kind: 'static' } },
        ],
        buckets: [{ id: 'unsold', default: true }],
      },
    });
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await svc?.stop();
  });

  it('shows the ping in the summary and its bids first in the timeline', async function () {
    const key = await svc!.key('supplier', 'sup-a');
    const pinged = await svc!.post({ zip: '90210', accident_state: 'CA', sid: 'google' }, { 'x-api-key': key }, '/functions/pings');
    const posted = await svc!.post(validLead({ sid: 'google', ping_id: pinged.body.ping_id }), { 'x-api-key': key });
    expect(posted.body).to.include({ code: 'SOLD', revenue: 40 });
    const events = (await svc!.request('GET', `/functions/leads/${posted.body.lead_id}/events`, { 'x-api-key': key })).body;

    const context = await browser!.newContext({ ignoreHTTPSErrors: true });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('pageerror', (error) => problems.push(error.message));
    await page.goto(`https://127.0.0.1:${svc!.port}/console`);
    await page.getByLabel('API key').fill(key);
    await page.getByLabel('API key').press('Enter');
    await page.waitForURL('**/console#/leads');
    await page.goto(`https://127.0.0.1:${svc!.port}/console#/leads/${posted.body.lead_id}`);
    const timeline = page.locator('#timeline');
    await timeline.waitFor();

    const types = await timeline.locator(':scope > li').evaluateAll((lis) => lis.map((li) => li.getAttribute('data-type')));
    const expected = [...(events.ping_events as Array<{ type: string }>), ...(events.items as Array<{ type: string }>)].map((e) => e.type);
    expect(types).to.deep.equal(expected);
    expect(types.slice(0, 3)).to.deep.equal(['LeadPinged', 'PingBidsCollected', 'PingPosted']);
    expect(await timeline.locator('table.bids tr[data-buyer="ca-buyer"] td').allInnerTexts()).to.deep.equal(['ca-buyer', 'bid', '40.00', '0 ms']);
    expect(await timeline.locator('table.bids tr[data-buyer="ny-buyer"] td').nth(1).innerText()).to.equal('not eligible (state not taken)');
    // Each answer and why as the service writes them, at hand as their tooltips.
    expect(await timeline.locator('table.bids tr[data-buyer="ny-buyer"] td [data-code]').evaluateAll((spans) => spans.map((span) => span.getAttribute('title')))).to.deep.equal(['ineligible', 'state_not_allowed']);
    expect(await page.locator('#lead-summary').innerText()).to.contain(`${pinged.body.ping_id as string}, sold at ca-buyer's bid of 40.00`);
    // At a phone's width each bid is a card: nothing scrolls sideways, every cell inside the window.
    await page.setViewportSize({ width: 390, height: 844 });
    const fits = await timeline.locator('table.bids').evaluate((table) => {
      const box = table.closest('.table-wrap')!;
      const width = table.ownerDocument.documentElement.clientWidth;
      const cells = [...table.querySelectorAll('td')].map((td) => td.getBoundingClientRect());
      return { scrolls: box.scrollWidth > box.clientWidth, outside: cells.filter((r) => r.left < 0 || r.right > width).length };
    });
    expect(fits).to.deep.equal({ scrolls: false, outside: 0 });
    mkdirSync('test-results/console', { recursive: true });
    await page.screenshot({ path: 'test-results/console/ping-lead-phone.png', fullPage: true });
    expect(problems).to.deep.equal([]);
    await context.close();
  });
});
