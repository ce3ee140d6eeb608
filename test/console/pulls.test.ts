import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Browser, type Page } from 'playwright-core';
import { launchChromium, signedInPage, skipWithoutChromium } from '../support/chromium.js';
import { TestService, leadWith, validLead } from '../support/service.js';

// A pull buyer's pages as the service changes under them: a pull whose delivery is cancelled while
// the list is open (its consumer erased) leaves the list when Acknowledge is refused for it; a
// Return keeps the keyboard on the page; a consumer's long name and e-mail wrap rather than push
// the Acknowledge button out of a laptop's window; and a buyer the routing file no longer names is
// told that returns are not possible now rather than offered a form with no reason to choose, and
// pulls the leads it was sold, which wait for it as a pull buyer's do.
// Screenshots go to SHOTS.

const SHOTS = 'test-results/console';
const BUYER = 'tx-buyer';
const GONE = 'oh-buyer';
const routing = (withGone: boolean) => ({
  buyers: [
    { id: BUYER, price: 40, states: ['TX'], return_reasons: ['bad_phone', 'wrong_state'], delivery: { kind: 'pull' } },
    ...(withGone ? [{ id: GONE, price: 35, states: ['OH'], return_reasons: ['bad_phone'], delivery: { kind: 'pull' } }] : []),
  ],
  buckets: [{ id: 'unsold', default: true }],
});
const TX = { accident_state: 'TX', zip: '75001' };
/** An e-mail as long as some are (71 characters), without a space to break at. */
const LONG_EMAIL = 'maximiliana.alexandrina.vandenberghe.oppenheimer.longaddress@outlook.com';

describe("a pull buyer's pages as the service changes under them", function () {
  this.timeout(120_000);
  let svc: TestService | undefined;
  let browser: Browser | undefined;
  let origin: string;
  const keys: Record<string, string> = {};

  before(async function () {
    skipWithoutChromium(this);
    svc = await TestService.start({ routing: routing(true) });
    origin = `https://127.0.0.1:${svc.port}`;
    keys.supplier = await svc.key('supplier', 'sup-a');
    keys.admin = await svc.key('admin', 'root');
    keys.buyer = await svc.key('buyer', BUYER);
    keys.gone = await svc.key('buyer', GONE);
    browser = await launchChromium(SHOTS);
  });
  after(async () => {
    await browser?.close();
    await svc?.stop();
  });

  const signedIn = (key: string, hash: string, viewport?: { width: number; height: number }): Promise<Page> => signedInPage(browser!, origin, key, { hash, ...(viewport ? { viewport } : {}) });

  /** Posts a lead, which must be sold, and returns its id once the read models have it. */
  async function sold(lead: Record<string, unknown>): Promise<number> {
    const posted = await svc!.post(lead, { 'x-api-key': keys.supplier! });
    expect(posted.body.code, posted.text).to.equal('SOLD');
    await svc!.service.projections.waitFor(await svc!.service.store.headPosition());
    return posted.body.lead_id as number;
  }

  it("an Acknowledge refused because the pull was cancelled meanwhile (its consumer erased) takes the row, and its consumer's details, off the list", async function () {
    const erased = leadWith('erased.meanwhile@outlook.com', '+12132007001', { ...TX, first_name: 'Pat', last_name: 'Erased' });
    const erasedId = await sold(erased);
    const keptId = await sold(validLead(TX));
    const page = await signedIn(keys.buyer!, '#/pulls');
    const row = page.locator(`#pulls-table tr[data-lead="${erasedId}"]`);
    await row.waitFor();
    await page.locator(`#pulls-table tr[data-lead="${keptId}"]`).waitFor();

    const erasure = await svc!.post({ email: erased.email }, { 'x-api-key': keys.admin! }, '/functions/erasures');
    expect(erasure.status, erasure.text).to.equal(201);
    await row.getByRole('button', { name: `Acknowledge lead ${erasedId}` }).click();
    await row.waitFor({ state: 'detached' });
    const message = page.locator('main [role="status"]');
    expect(await message.innerText()).to.match(new RegExp(`^Lead ${erasedId} was not acknowledged: .*cancelled.* 1 pending pull shown\\.$`));
    expect(await message.getAttribute('class')).to.contain('error');
    expect(await page.locator('main').innerText()).to.not.contain(erased.email as string).and.not.contain('Erased');
    // The focused button went with its row: the keyboard is on the pull still waiting.
    expect(await page.evaluate('document.activeElement.getAttribute("aria-label")')).to.equal(`Acknowledge lead ${keptId}`);
    await page.screenshot({ path: join(SHOTS, 'pulls-cancelled-meanwhile.png'), fullPage: true });
    await page.context().close();
  });

  it('a Return by keyboard leaves the focus on its answer, not on the body: the keyboard goes on from there, not from the top', async function () {
    const leadId = await sold(validLead(TX));
    const page = await signedIn(keys.buyer!, `#/leads/${leadId}`);
    const reason = page.getByLabel('Reason');
    await reason.waitFor();
    await reason.focus();
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('Enter');
    await page.locator('#return-answer', { hasText: /^Returned \(bad phone\)/ }).waitFor();
    expect(await page.evaluate('document.activeElement.id')).to.equal('return-answer');
    // Back from there: the control before the form (the list and Return are disabled), not the skip link.
    await page.keyboard.press('Shift+Tab');
    expect(await page.evaluate('document.activeElement.closest("main") !== null'), 'the Tab back, in the page').to.equal(true);
    await page.context().close();
  });

  it("a long name and e-mail wrap in Pulls and Bought at a laptop's widths: every column in sight, the page never wider than the window", async function () {
    const lead = leadWith(LONG_EMAIL, '+12132007003', { ...TX, first_name: 'Christopher', last_name: 'Montgomery-Williams' });
    const leadId = await sold(lead);
    const found: Record<string, unknown> = {};
    const wanted: Record<string, unknown> = {};
    for (const [hash, table] of [['#/pulls', '#pulls-table'], ['#/bought', '#bought-table']] as const) {
      for (const viewport of [{ width: 1280, height: 800 }, { width: 1366, height: 768 }]) {
        const page = await signedIn(keys.buyer!, hash, viewport);
        await page.locator(`${table} tr[data-lead="${leadId}"]`).waitFor();
        found[`${hash} ${viewport.width}`] = await page.locator(table).evaluate((el) => {
          const box = el.closest('.table-wrap')!.getBoundingClientRect();
          const outside = [...el.querySelectorAll('th, td')].filter((cell) => cell.getBoundingClientRect().right > box.right + 0.5).map((cell) => cell.textContent);
          const page = el.ownerDocument.scrollingElement!;
          return { fits: el.getBoundingClientRect().width <= box.width + 0.5, outside, page: page.scrollWidth <= page.clientWidth };
        });
        wanted[`${hash} ${viewport.width}`] = { fits: true, outside: [], page: true };
        await page.screenshot({ path: join(SHOTS, `pulls-long-${hash.slice(2)}-${viewport.width}.png`), fullPage: true });
        await page.context().close();
      }
    }
    expect(found).to.deep.equal(wanted);
  });

  it('a buyer the routing file no longer names: its lead page says returns are not possible now, and offers no form; its Pulls page takes the lead', async function () {
    const leadId = await sold(validLead({ accident_state: 'OH', zip: '43004' }));
    writeFileSync(join(svc!.dataDir, 'routing.json'), JSON.stringify(routing(false)));
    expect((await svc!.service.reload()).routing).to.include({ changed: true });
    const me = await svc!.request('GET', '/functions/me', { 'x-api-key': keys.gone! });
    expect(me.body.buyer).to.equal(null);

    const page = await signedIn(keys.gone!, `#/leads/${leadId}`);
    const note = page.locator('#returns-unavailable-note');
    await note.waitFor();
    expect(await note.innerText()).to.match(/^Returns not possible now\n+/).and.contain(`The routing in force no longer names ${GONE} as a buyer: your return reasons and window went with it, so the service takes no return from you for now.`);
    expect(await page.locator('#return-form').count()).to.equal(0);
    await page.screenshot({ path: join(SHOTS, 'pulls-unrouted-buyer-lead.png'), fullPage: true });

    // Its leads wait to be pulled, as the API lists and acknowledges them: it has its Pulls page, not a webhook buyer's note.
    expect(await page.locator('#nav a:visible').allInnerTexts()).to.include('Pulls');
    await page.getByRole('link', { name: 'Pulls' }).click();
    const row = page.locator(`#pulls-table tr[data-lead="${leadId}"]`);
    await row.getByRole('button', { name: `Acknowledge lead ${leadId}` }).click();
    await row.waitFor({ state: 'detached' });
    await svc!.service.projections.waitFor(await svc!.service.store.headPosition());
    const delivered = await svc!.request('GET', '/functions/deliveries?status=delivered', { 'x-api-key': keys.gone! });
    expect((delivered.body.items as Array<{ lead_id: number }>).map((item) => item.lead_id)).to.deep.equal([leadId]);
    await page.context().close();
  });
});
