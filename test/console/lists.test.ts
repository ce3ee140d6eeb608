import { expect } from 'chai';
import { join } from 'node:path';
import { type Browser, type Page, type Route } from 'playwright-core';
import { launchChromium, signedInPage, skipWithoutChromium } from '../support/chromium.js';
import { TestService, leadWith, validLead } from '../support/service.js';
import { until } from '../support/until.js';

// The console's lists as they meet what the service may do to them: a source or a buyer named as
// long as the service takes one (and, among a consumer's leads, a long e-mail) wraps in its cell
// rather than widen its table; a Show that gets no answer, or a 429 or 5xx, keeps the rows shown
// and marks them out of date (a first load that fails shows no headings over nothing); the leads
// of a range longer than a report takes are listed while "By code" says it cannot be shown for it;
// a form whose only field is a list submits with Enter; a report whose Show is not answered keeps
// the last one, marked out of date and named; a lead failing on every field keeps its failing
// fields within the table's box; and a source or lead id the form cannot take is said in words
// next to its field. Screenshots go to SHOTS.

const SHOTS = 'test-results/console';
/** A sid and a buyer id as long as the service takes them, with no space to break at. */
const LONG_SID = 's'.repeat(64);
const LONG_BUYER = `b${'w'.repeat(62)}b`;
const ROUTING = {
  buyers: [
    { id: 'ca-buyer', price: 40, states: ['CA'], return_reasons: ['bad_phone', 'fraud'] },
    { id: LONG_BUYER, price: 33, states: ['WA'] },
  ],
  buckets: [{ id: 'unsold', default: true }],
};
/** An e-mail as long as some are, without a space to break at. */
const LONG_EMAIL = 'wendy.washington.longaddress.example.of-a-consumer@outlook.com';
/** The console's error colour (--bad in console.css), as the browser computes it. */
const ERROR_COLOUR = 'rgb(179, 38, 30)';
const day = (days: number) => new Date(Date.now() + days * 86_400_000).toISOString().slice(0, 10);

describe("the console's lists: long names, a Show that fails, a long range, Enter from a list", function () {
  this.timeout(120_000);
  let svc: TestService | undefined;
  let browser: Browser | undefined;
  let origin: string;
  const keys: Record<string, string> = {};
  const leads: Record<string, number> = {};

  before(async function () {
    skipWithoutChromium(this);
    svc = await TestService.start({ routing: ROUTING });
    origin = `https://127.0.0.1:${svc.port}`;
    keys.supplier = await svc.key('supplier', 'sup-a');
    keys.analyst = await svc.key('analyst', 'ann');
    keys.buyer = await svc.key('buyer', 'ca-buyer');
    keys.admin = await svc.key('admin', 'root');
    const post = async (name: string, lead: Record<string, unknown>) => {
      const answer = await svc!.post(lead, { 'x-api-key': keys.supplier! });
      leads[name] = answer.body.lead_id as number;
      return answer;
    };
    expect((await post('longSid', validLead({ sid: LONG_SID }))).body.code).to.equal('SOLD');
    expect((await post('longBuyer', validLead({ accident_state: 'WA', zip: '98101', sid: 'google' }))).body.code).to.equal('SOLD');
    expect((await post('caSold', validLead({ sid: 'google' }))).body.code).to.equal('SOLD');
    // A consumer with a long name and a long e-mail, its lead sold to the long buyer.
    const longConsumer = { accident_state: 'WA', zip: '98101', sid: 'wa-src', s1: 'wa-1', first_name: 'Wendolyn-Maximiliana', last_name: 'Washington-Worthington' };
    expect((await post('longConsumer', leadWith(LONG_EMAIL, '+12132008888', longConsumer))).body.code).to.equal('SOLD');
    expect((await post('invalid', validLead({ zip: 'bad', sid: 'bing' }))).body.code).to.equal('INVALID');
    expect((await post('invalid2', validLead({ zip: 'bad', email: 'nope', sid: 'bing' }))).body.code).to.equal('INVALID');
    await svc.service.projections.waitFor(await svc.service.store.headPosition());
    browser = await launchChromium(SHOTS);
  });
  after(async () => {
    await browser?.close();
    await svc?.stop();
  });

  const signedIn = (key: string, hash: string): Promise<Page> => signedInPage(browser!, origin, key, { hash });

  /** A table's width and its box's (the scrolling box it is in): the table fits when it is no wider. */
  const widths = (page: Page, table: string) =>
    page.locator(table).evaluate((el) => ({ table: Math.round(el.getBoundingClientRect().width), box: el.closest('.table-wrap')!.clientWidth }));

  /**
   * How a part of the page is marked: 'out of date' (greyed and in a dashed frame, its own or that of
   * a part around it, fully opaque) or 'current'.
   */
  const marked = (page: Page, selector: string) =>
    page.locator(selector).evaluate((el) => {
      const styles = [];
      for (let box = el as typeof el.parentElement; box && box.tagName !== 'BODY'; box = box.parentElement) styles.push(el.ownerDocument.defaultView!.getComputedStyle(box));
      if (styles.some((s) => s.opacity !== '1')) return 'faded';
      const greyed = styles.some((s) => s.filter === 'grayscale(1)');
      const framed = styles.some((s) => s.outlineStyle === 'dashed');
      return greyed && framed ? 'out of date' : !greyed && !framed ? 'current' : `greyed ${greyed}, framed ${framed}`;
    });

  const rows = (page: Page, table: string) => page.locator(`${table} tbody tr`).evaluateAll((trs) => trs.map((tr) => Number(tr.getAttribute('data-lead'))));

  /** Answers the list route with `status` instead of the service (429 with its Retry-After, as the service sends it). */
  const answering = (status: number) => (route: Route) =>
    route.fulfill({
      status,
      contentType: 'application/json',
      headers: status === 429 ? { 'Retry-After': '1' } : {},
      body: JSON.stringify(status === 429 ? { code: 'RATE_LIMITED', message: 'too many requests' } : { code: 'UNAVAILABLE', message: 'not ready' }),
    });
  const noAnswer = (route: Route) => route.abort('connectionrefused');

  it('a 64-character sid and a 64-character buyer id wrap in their cells: the leads table and the chart numbers fit their boxes', async function () {
    const page = await signedIn(keys.analyst!, '#/leads');
    await page.locator(`#leads-table tr[data-lead="${leads.longSid}"]`).waitFor();
    await page.locator(`#leads-table tr[data-lead="${leads.longBuyer}"]`).waitFor();
    const leadsWidths = await widths(page, '#leads-table');
    expect(leadsWidths.table, `the leads table (${JSON.stringify(leadsWidths)})`).to.be.at.most(leadsWidths.box);
    // Every column still in sight: the last one's right edge inside the box.
    const lastInSight = await page.locator('#leads-table').evaluate((el) => el.tHead!.rows[0]!.lastElementChild!.getBoundingClientRect().right <= el.closest('.table-wrap')!.getBoundingClientRect().right + 0.5);
    expect(lastInSight, 'Failing fields in sight').to.equal(true);
    await page.screenshot({ path: join(SHOTS, 'lists-long-sid.png'), fullPage: true });

    await page.goto(`${origin}/console#/report?from=${day(-1)}&to=${day(1)}&tz=UTC&group_by=buyer`);
    await page.locator('#chart-groups[data-totals]').waitFor();
    const numbers = page.locator('#chart-groups-numbers');
    await numbers.getByText('Show the numbers', { exact: true }).click();
    const table = numbers.locator('table.chart-numbers');
    await table.getByRole('rowheader', { name: LONG_BUYER }).waitFor();
    const chartWidths = await widths(page, '#chart-groups-numbers table.chart-numbers');
    expect(chartWidths.table, `the chart's numbers (${JSON.stringify(chartWidths)})`).to.be.at.most(chartWidths.box);
    await numbers.scrollIntoViewIfNeeded();
    await page.screenshot({ path: join(SHOTS, 'lists-long-buyer-numbers.png'), fullPage: true });
    await page.context().close();
  });

  it("a consumer's leads, with a 64-character buyer id and a long e-mail, fit a laptop's window: long values wrap, every column in sight", async function () {
    const page = await signedIn(keys.admin!, '#/personal-data');
    const found: Record<string, unknown> = {};
    const wanted: Record<string, unknown> = {};
    for (const [width, height] of [[1280, 800], [1366, 768]] as const) {
      await page.setViewportSize({ width, height });
      await page.getByLabel('E-mail').first().fill(LONG_EMAIL);
      await page.getByRole('button', { name: 'Find', exact: true }).click();
      await page.locator(`#consumer-leads tr[data-lead="${leads.longConsumer}"]`).waitFor();
      found[width] = await page.locator('#consumer-leads').evaluate((table) => {
        const box = table.closest('.table-wrap')!.getBoundingClientRect();
        const page = table.ownerDocument.scrollingElement!;
        // Each heading and cell whole inside the box, none cut at its right edge.
        const outside = [...table.querySelectorAll('th, td')].filter((cell) => cell.getBoundingClientRect().right > box.right + 0.5).map((cell) => cell.textContent);
        return { fits: table.getBoundingClientRect().width <= box.width + 0.5, outside, page: page.scrollWidth <= page.clientWidth };
      });
      wanted[width] = { fits: true, outside: [], page: true };
      await page.screenshot({ path: join(SHOTS, `consumer-leads-${width}.png`), fullPage: true });
    }
    expect(found).to.deep.equal(wanted);
    await page.context().close();
  });

  it('leads: a Show with no answer, a 429 or a 503 keeps the rows shown, marked out of date, and the per-field card that counts them; the next answer replaces them', async function () {
    const page = await signedIn(keys.analyst!, '#/leads');
    const message = page.locator('#leads-message');
    await message.filter({ hasText: /^\d+ leads shown\.$/ }).waitFor();
    await page.locator('#rejections-by-code[data-totals]').waitFor();
    const before = await rows(page, '#leads-table');
    expect(before).to.include.members(Object.values(leads));
    const byField = await page.locator('#rejections-by-field').innerText();
    expect(byField).to.contain('Counts the 2 rejected leads shown');
    expect(await marked(page, '#leads-table >> xpath=..')).to.equal('current');

    const failures: Array<[string, (route: Route) => Promise<void>, string]> = [
      ['no answer', noAnswer, 'The service cannot be reached. Try again.'],
      ['429', answering(429), 'Too many requests from this key: wait 1 second and try again.'],
      ['503', answering(503), 'The service could not answer (HTTP 503). Try again shortly.'],
    ];
    for (const [what, handler, words] of failures) {
      await page.route(/\/functions\/(leads|reports\/summary)\?/, handler);
      await page.getByLabel('Status').selectOption('sold');
      await page.getByRole('button', { name: 'Show', exact: true }).click();
      await message.filter({ hasText: words }).waitFor();
      expect(await rows(page, '#leads-table'), what).to.deep.equal(before);
      expect(await page.locator('#leads-table thead').isVisible(), what).to.equal(true);
      expect(await message.innerText(), what).to.equal(`${words} The ${before.length} leads below are from before, out of date.`);
      expect(await page.evaluate("getComputedStyle(document.getElementById('leads-message')).color"), what).to.equal(ERROR_COLOUR);
      expect(await marked(page, '#leads-table >> xpath=..'), what).to.equal('out of date');
      // The per-field card still counts the rows shown, and is marked with them.
      expect(await page.locator('#rejections-by-field').innerText(), what).to.equal(byField);
      expect(await marked(page, '#rejections-by-field'), what).to.equal('out of date');
      if (what === 'no answer') await page.screenshot({ path: join(SHOTS, 'lists-leads-kept.png'), fullPage: true });
      await page.unroute(/\/functions\/(leads|reports\/summary)\?/, handler);
    }

    // Answered again: the sold leads, the marks gone.
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    await message.filter({ hasText: /^\d+ leads shown\.$/ }).waitFor();
    expect(await rows(page, '#leads-table')).to.have.members([leads.longSid, leads.longBuyer, leads.caSold, leads.longConsumer]);
    expect(await marked(page, '#leads-table >> xpath=..')).to.equal('current');
    expect(await marked(page, '#rejections-by-field')).to.equal('current');
    expect(await page.locator('#rejections-by-field').innerText()).to.contain('Counts the 0 rejected leads shown');
    await page.context().close();
  });

  it('deliveries: a Show that fails keeps the rows, marked out of date; a first load that fails shows no headings over nothing', async function () {
    const page = await signedIn(keys.analyst!, '#/deliveries');
    const message = page.locator('#deliveries-message');
    await message.filter({ hasText: /^\d+ deliveries shown\.$/ }).waitFor();
    const before = await rows(page, '#deliveries-table');
    expect(before.length).to.be.greaterThan(0);
    for (const [what, handler, words] of [
      ['no answer', noAnswer, 'The service cannot be reached. Try again.'],
      ['429', answering(429), 'Too many requests from this key: wait 1 second and try again.'],
      ['502', answering(502), 'The service could not answer (HTTP 502). Try again shortly.'],
    ] as const) {
      await page.route(/\/functions\/deliveries\?/, handler);
      await page.getByLabel('Status').selectOption('failed');
      await page.getByRole('button', { name: 'Show', exact: true }).click();
      await message.filter({ hasText: words }).waitFor();
      expect(await rows(page, '#deliveries-table'), what).to.deep.equal(before);
      expect(await message.innerText(), what).to.equal(`${words} The ${before.length} deliveries below are from before, out of date.`);
      expect(await marked(page, '#deliveries-table >> xpath=..'), what).to.equal('out of date');
      if (what === '429') await page.screenshot({ path: join(SHOTS, 'lists-deliveries-kept.png'), fullPage: true });
      await page.unroute(/\/functions\/deliveries\?/, handler);
    }
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    await message.filter({ hasText: 'No failed deliveries.' }).waitFor();
    expect(await page.locator('#deliveries-table').isVisible()).to.equal(false);

    // Opened while the service refuses: the refusal, and no headings over nothing.
    await page.route(/\/functions\/deliveries\?/, answering(429));
    await page.goto(`${origin}/console#/leads`);
    await page.locator('#leads-message').filter({ hasText: /shown/ }).waitFor();
    await page.goto(`${origin}/console#/deliveries`);
    await message.filter({ hasText: 'Too many requests' }).waitFor();
    expect(await page.locator('#deliveries-table thead th').first().isVisible()).to.equal(false);
    await page.screenshot({ path: join(SHOTS, 'lists-deliveries-refused.png'), fullPage: true });
    await page.context().close();
  });

  it("a buyer's Bought and Pulls refused as they open: the refusal and Try again, no headings over nothing", async function () {
    const page = await signedIn(keys.buyer!, '#/bought');
    await page.locator('#bought-message').filter({ hasText: /shown/ }).waitFor();
    await page.route(/\/functions\/(leads|deliveries)\?/, answering(429));
    for (const [hash, table] of [['#/pulls', '#pulls-table'], ['#/bought', '#bought-table']] as const) {
      await page.goto(`${origin}/console${hash}`);
      await page.locator('#page-failed', { hasText: 'Too many requests' }).waitFor();
      expect(await page.locator(`${table} thead th`).first().isVisible(), hash).to.equal(false);
      if (hash === '#/pulls') await page.screenshot({ path: join(SHOTS, 'lists-pulls-refused.png'), fullPage: true });
    }
    await page.context().close();
  });

  it('leads over more than 366 days: listed, their count in the status line, and "By code" says in error style it cannot be shown for those dates', async function () {
    const page = await signedIn(keys.analyst!, '#/leads');
    const message = page.locator('#leads-message');
    await page.locator('#rejections-by-code[data-totals]').waitFor();
    await message.filter({ hasText: /^\d+ leads shown\.$/ }).waitFor();
    const from = '2024-01-01';
    const to = day(0);
    await page.getByLabel('From (UTC)').fill(from);
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    const note = page.locator('#rejections-by-code-error');
    await note.waitFor({ timeout: 10_000 });
    expect(await note.innerText()).to.match(new RegExp(`^Cannot be shown for ${from} to ${to} \\(UTC\\): .*366 days.*\\.$`));
    expect(await note.evaluate((el) => el.ownerDocument.defaultView!.getComputedStyle(el).color)).to.equal(ERROR_COLOUR);
    // Not another range's counts: no table, no totals.
    expect(await page.locator('#rejections-by-code table').count()).to.equal(0);
    expect(await page.locator('#rejections-by-code').getAttribute('data-totals')).to.equal(null);
    // The list takes any range: the leads are shown, and the status line counts them.
    await message.filter({ hasText: /shown/ }).waitFor();
    expect(await message.innerText()).to.equal(`${Object.keys(leads).length} leads shown.`);
    expect(await message.getAttribute('class')).to.contain('muted').and.not.contain('error');
    expect(await rows(page, '#leads-table')).to.have.members(Object.values(leads));
    expect(await page.locator('#rejections-by-field').innerText()).to.contain('Counts the 2 rejected leads shown');
    await page.screenshot({ path: join(SHOTS, 'lists-long-range.png'), fullPage: true });

    // Back within a report's range: the counts again.
    await page.getByLabel('From (UTC)').fill(day(-6));
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    await page.locator('#rejections-by-code[data-totals]').waitFor();
    expect(await note.count()).to.equal(0);
    expect(await page.locator('#rejections-by-code tfoot').innerText()).to.match(/Total\s+2/);
    await page.context().close();
  });

  it('a form whose only field is a list submits with Enter: the deliveries filter and a buyer\'s return', async function () {
    const page = await signedIn(keys.analyst!, '#/deliveries');
    const message = page.locator('#deliveries-message');
    await message.filter({ hasText: /^\d+ deliveries shown\.$/ }).waitFor();
    const status = page.getByLabel('Status');
    await status.focus();
    await page.keyboard.press('ArrowDown');
    expect(await status.inputValue()).to.equal('pending');
    const asked = page.waitForRequest((req) => req.url().includes('/functions/deliveries?') && req.url().includes('status=pending'), { timeout: 5000 });
    await page.keyboard.press('Enter');
    await asked;
    await message.filter({ hasText: /^\d+ deliveries shown\.$/ }).waitFor();
    expect(await page.locator('#deliveries-table tbody tr').evaluateAll((trs) => trs.map((tr) => tr.cells[3]!.textContent))).to.satisfy((s: string[]) => s.length > 0 && s.every((t) => t.startsWith('Pending')));
    await page.context().close();

    const buyer = await signedIn(keys.buyer!, `#/leads/${leads.caSold}`);
    const reason = buyer.getByLabel('Reason');
    await reason.waitFor();
    await reason.focus();
    await buyer.keyboard.press('ArrowDown');
    expect(await reason.inputValue()).to.equal('bad_phone');
    await buyer.keyboard.press('Enter');
    await buyer.locator('#return-answer', { hasText: /^Returned \(bad phone\)/i }).waitFor({ timeout: 5000 });
    await buyer.context().close();
  });
  it('report: a Show not answered for now (429, 503) keeps the last report, marked out of date and named in the status line; the next answer clears the marks', async function () {
    const page = await signedIn(keys.analyst!, `#/report?from=${day(-6)}&to=${day(0)}&tz=UTC&group_by=sid`);
    const status = page.locator('#report-status');
    await status.filter({ hasText: / rows, / }).waitFor();
    const named = `The charts and rows below are still those of the last report shown (${day(-6)} to ${day(0)} in UTC, by source (sid)), out of date.`;
    const rowsBefore = await page.locator('#report-rows').innerText();
    expect(await marked(page, '#chart-daily')).to.equal('current');
    for (const [what, handler, words] of [
      ['429', answering(429), 'Too many requests from this key: wait 1 second and try again.'],
      ['503', answering(503), 'The service could not answer (HTTP 503). Try again shortly.'],
    ] as const) {
      await page.route(/\/functions\/reports\/summary\?/, handler);
      await page.getByLabel('Group by').selectOption('state');
      await page.getByRole('button', { name: 'Show', exact: true }).click();
      await status.filter({ hasText: words }).waitFor();
      expect(await status.innerText(), what).to.equal(`${words} ${named}`);
      expect(await page.evaluate("getComputedStyle(document.getElementById('report-status')).color"), what).to.equal(ERROR_COLOUR);
      for (const part of ['#chart-daily', '#chart-groups', '#report-rows']) expect(await marked(page, part), `${what}: ${part}`).to.equal('out of date');
      expect(await page.locator('#report-rows').innerText(), what).to.equal(rowsBefore);
      if (what === '429') await page.screenshot({ path: join(SHOTS, 'lists-report-kept.png'), fullPage: true });
      await page.unroute(/\/functions\/reports\/summary\?/, handler);
    }
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    await status.filter({ hasText: / rows, / }).waitFor();
    for (const part of ['#chart-daily', '#chart-groups', '#report-rows']) expect(await marked(page, part), part).to.equal('current');
    expect(new URL(page.url()).hash).to.contain('group_by=state');
    await page.context().close();
  });

  it("leads: a lead failing on every field keeps its failing fields within the table's box at a laptop's widths", async function () {
    // A supplier of its own: the other tests' counts of every lead stay as they are.
    const key = await svc!.key('supplier', 'sup-many-fields');
    const sevenFields = { first_name: '-', last_name: '-', email: 'nope', mobile: '12', zip: '1', accident_state: 'XX', certificate_url: 'http://example.com/x', sid: 'fb-ads' };
    const posted = await svc!.post(sevenFields, { 'x-api-key': key });
    expect(posted.body.code, posted.text).to.equal('INVALID');
    expect((posted.body.errors as unknown[]).length).to.be.at.least(6);
    await svc!.service.projections.waitFor(await svc!.service.store.headPosition());
    const page = await signedIn(key, '#/leads');
    const found: Record<string, unknown> = {};
    const wanted: Record<string, unknown> = {};
    for (const [width, height] of [[1280, 800], [1366, 768]] as const) {
      await page.setViewportSize({ width, height });
      await page.locator(`#leads-table tr[data-lead="${posted.body.lead_id as number}"]`).waitFor();
      found[width] = await page.locator('#leads-table').evaluate((table) => {
        const box = table.closest('.table-wrap')!.getBoundingClientRect();
        const outside = [...table.querySelectorAll('th, td')].filter((cell) => cell.getBoundingClientRect().right > box.right + 0.5).map((cell) => cell.textContent);
        return { fits: table.getBoundingClientRect().width <= box.width + 0.5, outside };
      });
      wanted[width] = { fits: true, outside: [] };
      await page.screenshot({ path: join(SHOTS, `lists-failing-fields-${width}.png`), fullPage: true });
    }
    expect(found).to.deep.equal(wanted);
    await page.context().close();
  });

  it('a source (sid), lead id or erasure id the form cannot take is said in words next to its field, which takes the keyboard; nothing is asked', async function () {
    const page = await signedIn(keys.analyst!, '#/leads');
    const message = page.locator('#leads-message');
    await message.filter({ hasText: /^\d+ leads shown\.$/ }).waitFor();
    /** The words a control is described by (its note under it), and whether it is marked and focused. */
    const note = (label: string) =>
      page.getByLabel(label, { exact: true }).evaluate((input) => ({
        words: input.ownerDocument.getElementById(input.getAttribute('aria-describedby') ?? '')?.textContent ?? null,
        invalid: input.getAttribute('aria-invalid'),
        focused: input.ownerDocument.activeElement === input,
      }));
    const asked: string[] = [];
    page.on('request', (request) => {
      if (request.url().includes('/functions/leads')) asked.push(request.url());
    });
    await page.getByLabel('Source (sid)', { exact: true }).fill('google ads');
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    await until('the note under Source (sid)', async () => (await note('Source (sid)')).words !== null);
    expect(await note('Source (sid)')).to.deep.equal({ words: 'A source (sid) is 1 to 64 letters, digits, dots, underscores or hyphens, with no space.', invalid: 'true', focused: true });
    // Put right, the note goes, and the list is asked for that source.
    await page.getByLabel('Source (sid)', { exact: true }).fill('google');
    expect(await note('Source (sid)')).to.deep.equal({ words: null, invalid: null, focused: true });

    const address = page.url();
    await page.getByLabel('Lead id', { exact: true }).fill('L-1042');
    await page.getByRole('button', { name: 'Open', exact: true }).click();
    await until('the note under Lead id', async () => (await note('Lead id')).words !== null);
    expect(await note('Lead id')).to.deep.equal({ words: 'A lead id is a number, such as 1042.', invalid: 'true', focused: true });
    expect(page.url()).to.equal(address);
    expect(asked, 'nothing asked for either').to.deep.equal([]);
    await page.screenshot({ path: join(SHOTS, 'lists-bad-sid-lead-id.png'), fullPage: true });
    await page.context().close();

    // An erasure id pasted in upper case: said the same way next to its field.
    const admin = await signedIn(keys.admin!, '#/personal-data');
    const erasureId = admin.getByLabel('Erasure id', { exact: true });
    await erasureId.fill('0123456789ABCDEF0123456789ABCDEF');
    await admin.getByRole('button', { name: 'Look up', exact: true }).click();
    const erasureNote = () => erasureId.evaluate((input) => ({ words: input.ownerDocument.getElementById(input.getAttribute('aria-describedby') ?? '')?.textContent ?? null, focused: input.ownerDocument.activeElement === input }));
    await until('the note under Erasure id', async () => (await erasureNote()).words !== null);
    expect(await erasureNote()).to.deep.equal({ words: 'An erasure id is 32 characters of 0 to 9 and a to f (lower case), as the erasure answered it.', focused: true });
    expect(new URL(admin.url()).hash).to.equal('#/personal-data');
    await admin.context().close();
  });
});
