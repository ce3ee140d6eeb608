import { expect } from 'chai';
import { leadStream } from '../../src/events/lead-events.js';
import { join } from 'node:path';
import { type Browser, type Page } from 'playwright-core';
import { launchChromium, signedInPage, skipWithoutChromium } from '../support/chromium.js';
import { TestService, validLead } from '../support/service.js';
import { until } from '../support/until.js';

// The console as its readers meet it: outcome codes read as words (the code still at hand), the
// charts' numbers readable without seeing the chart, a focus ring that can be seen wherever the
// focus is, and every page whole at 360 px wide and at 200% zoom. Screenshots go to SHOTS.

const SHOTS = 'test-results/console';
const ROUTING = {
  buyers: [
    { id: 'ca-buyer', price: 40, states: ['CA'], return_reasons: ['bad_phone'] },
    // A webhook buyer nobody listens for (port 1): its one attempt fails, for good.
    { id: 'fl-hook', price: 25, states: ['FL'], delivery: { kind: 'webhook', url: 'https://127.0.0.1:1/leads', timeout_ms: 1000, max_attempts: 1 } },
  ],
  buckets: [{ id: 'unsold', default: true }],
};
/** Every outcome code the service gives, as it writes them. */
const CODES = /\b(SOLD|UNSOLD|INVALID|VERIFICATION_FAILED|DUPLICATE|SUPPRESSED|PING_EXPIRED|PING_CONSUMED|PING_MISMATCH)\b/;

describe('the console read by eye, keyboard and screen reader', function () {
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
    keys.admin = await svc.key('admin', 'root');
    keys.buyer = await svc.key('buyer', 'ca-buyer');
    const post = async (name: string, lead: Record<string, unknown>) => {
      const answer = await svc!.post(lead, { 'x-api-key': keys.supplier! });
      leads[name] = answer.body.lead_id as number;
      return answer;
    };
    const sold = validLead({ sid: 'google' });
    await post('sold', sold);
    expect((await post('duplicate', { ...sold })).body.code).to.equal('DUPLICATE');
    expect((await post('invalid', validLead({ zip: 'bad', sid: 'bing' }))).body.code).to.equal('INVALID');
    expect((await post('unsold', validLead({ accident_state: 'TX', zip: '75001', sid: 'meta' }))).body.code).to.equal('UNSOLD');
    await post('hooked', validLead({ accident_state: 'FL', zip: '33101', sid: 'meta' }));
    await svc.service.projections.waitFor(await svc.service.store.headPosition());
    browser = await launchChromium(SHOTS);
  });
  after(async () => {
    await browser?.close();
    await svc?.stop();
  });

  const signedIn = (key: string, viewport = { width: 1280, height: 800 }, deviceScaleFactor = 1): Promise<Page> => signedInPage(browser!, origin, key, { viewport, deviceScaleFactor });

  /** Text in main that shows an outcome code bare: outside the code element beside its words. */
  const bareCodes = (page: Page) =>
    page.evaluate(`(() => {
      const found = [];
      const walker = document.createTreeWalker(document.querySelector('main'), NodeFilter.SHOW_TEXT);
      while (walker.nextNode()) {
        const node = walker.currentNode;
        const el = node.parentElement;
        if (el.closest('code.code, option, [hidden]') || !el.checkVisibility()) continue;
        if (${CODES}.test(node.textContent)) found.push(node.textContent.trim());
      }
      return found;
    })()`) as Promise<string[]>;

  it('outcome codes read as words a lead business uses, each code still at hand beside them or as their tooltip', async function () {
    const page = await signedIn(keys.analyst!);
    await page.goto(`${origin}/console#/leads`);
    const table = page.locator('#leads-table');
    await table.locator(`tr[data-lead="${leads.duplicate}"]`).waitFor();
    await page.locator('#rejections-by-code tbody tr').first().waitFor();
    const codeCell = (lead: number) => table.locator(`tr[data-lead="${lead}"] td`).nth(3);
    expect(await codeCell(leads.duplicate!).innerText()).to.equal('Duplicate DUPLICATE');
    expect(await codeCell(leads.duplicate!).locator('[title]').getAttribute('title')).to.equal('DUPLICATE');
    expect(await codeCell(leads.invalid!).innerText()).to.equal('Invalid fields INVALID');
    expect(await codeCell(leads.unsold!).innerText()).to.equal('Not sold UNSOLD');
    expect(await table.locator(`tr[data-lead="${leads.unsold}"] td`).nth(2).innerText()).to.equal('Not sold');
    expect(await page.locator('#rejections-by-code tr[data-code="DUPLICATE"] th').innerText()).to.match(/^Duplicate DUPLICATE\n/);
    // The code filter: each code's words with the code beside them (an option holds text only).
    expect(await page.getByLabel('Code', { exact: true }).locator('option[value="SUPPRESSED"]').innerText()).to.equal('Do not contact (SUPPRESSED)');
    expect(await bareCodes(page)).to.deep.equal([]);
    await page.screenshot({ path: join(SHOTS, 'words-leads.png'), fullPage: true });

    await page.goto(`${origin}/console#/leads/${leads.duplicate}`);
    await page.locator('#timeline [data-type="LeadRejected"]').waitFor();
    expect(await page.locator('#lead-summary').innerText()).to.contain('Status\nRejected').and.contain('Code\nDuplicate DUPLICATE');
    expect(await page.locator('#timeline [data-type="LeadRejected"] p').first().innerText()).to.equal('Rejected: Duplicate DUPLICATE.');
    expect(await bareCodes(page)).to.deep.equal([]);

    await page.goto(`${origin}/console#/report?columns=rejections`);
    await page.locator('#report-table').waitFor();
    const heads = page.locator('#report-table thead th[data-field^="rejected_"], #report-table thead th span[data-code]');
    expect(await page.locator('#report-table thead th span[data-code="DUPLICATE"]').innerText()).to.equal('Duplicate');
    expect(await page.locator('#report-table thead th span[data-code="DUPLICATE"]').getAttribute('title')).to.equal('DUPLICATE');
    expect(await heads.count()).to.be.greaterThan(6);
    expect(await bareCodes(page)).to.deep.equal([]);
    await page.screenshot({ path: join(SHOTS, 'words-report.png'), fullPage: true });
    await page.context().close();
  });

  it("each chart's numbers are there without seeing it: the chart says where, and a table holds what it draws", async function () {
    const page = await signedIn(keys.analyst!);
    await page.goto(`${origin}/console#/report?group_by=sid`);
    await page.locator('#chart-daily[data-totals]').waitFor();
    for (const chart of ['chart-daily', 'chart-groups']) {
      const canvas = page.locator(`#${chart} canvas`);
      const note = page.locator(`#${await canvas.getAttribute('aria-describedby')}`);
      expect(await note.innerText(), chart).to.contain('Show the numbers');
      await page.locator(`#${chart}-numbers summary`).click();
      const table = page.locator(`#${chart}-numbers table`);
      expect(await table.locator('caption').innerText()).to.equal(`${await canvas.getAttribute('aria-label')}, as numbers`);
      // Each column summed is the chart's dataset summed: the table holds what is drawn.
      const sums = await table.evaluate((t: any) => {
        const heads = [...t.tHead.rows[0].cells].slice(1).map((th: any) => th.textContent);
        return Object.fromEntries(heads.map((head: string, i: number) => [head, [...t.tBodies[0].rows].reduce((s: number, tr: any) => s + Number(tr.cells[i + 1].textContent.replaceAll(',', '')), 0)]));
      });
      const totals = JSON.parse((await page.locator(`#${chart}`).getAttribute('data-totals'))!) as Record<string, number>;
      const byHeading: Record<string, number> = {};
      for (const [key, value] of Object.entries(totals)) byHeading[key === 'revenue' ? 'Revenue (USD)' : key[0]!.toUpperCase() + key.slice(1)] = value;
      expect(sums, chart).to.deep.equal(byHeading);
    }
    expect(await page.locator('#chart-daily-numbers tbody tr').count()).to.equal(7);
    expect(await page.locator('#chart-groups-numbers tbody th').allInnerTexts()).to.have.members(['google', 'bing', 'meta']);
    await page.screenshot({ path: join(SHOTS, 'chart-numbers.png'), fullPage: true });
    await page.context().close();
  });

  /**
   * Where the keyboard's focus goes on a page, Tab by Tab from the top: each stop's name and how
   * its ring reads, as its contrast against what is behind the ring (WCAG asks 3:1 for a focus
   * indicator, 1.4.11) and its width. Run in the page after each Tab.
   */
  const RING = `(() => {
    const el = document.activeElement;
    const rgb = (css) => (css.match(/[\\d.]+/g) || []).map(Number);
    const luminance = ([r, g, b]) => [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; }).reduce((s, v, i) => s + v * [0.2126, 0.7152, 0.0722][i], 0);
    const style = getComputedStyle(el);
    // What the ring is drawn over: whatever is under its left side, the element itself aside.
    const r = el.getBoundingClientRect();
    const x = Math.max(0, r.left - parseFloat(style.outlineOffset) - parseFloat(style.outlineWidth) / 2);
    let behind = 'rgb(255, 255, 255)';
    for (const box of document.elementsFromPoint(x, r.top + r.height / 2)) {
      if (el.contains(box)) continue;
      const bg = getComputedStyle(box).backgroundColor;
      const [, , , alpha = 1] = rgb(bg);
      if (bg !== 'transparent' && alpha > 0) { behind = bg; break; }
    }
    const [a, b] = [luminance(rgb(style.outlineColor)), luminance(rgb(behind))].sort((x, y) => y - x);
    const name = (el.getAttribute('aria-label') || el.textContent || el.name || el.tagName).trim().slice(0, 30);
    return { name: el.tagName.toLowerCase() + ' ' + name, contrast: Math.round(((a + 0.05) / (b + 0.05)) * 10) / 10, width: style.outlineStyle === 'none' ? 0 : parseFloat(style.outlineWidth) };
  })()`;

  it('the focus ring can be seen wherever the keyboard is: at least 3:1 against what is behind it, on the page and in the header', async function () {
    const page = await signedIn(keys.admin!);
    const weak: unknown[] = [];
    let stops = 0;
    for (const hash of ['#/report', '#/deliveries', '#/personal-data', `#/leads/${leads.duplicate}`]) {
      await page.goto(`${origin}/console${hash}`);
      await page.locator('main h1').waitFor();
      await page.locator('main [role="status"]:not(:empty), #timeline, #erasures-message:not(:empty)').first().waitFor();
      // From the top of the document: the skip link, the header, then the page.
      await page.evaluate('document.activeElement.blur(); window.scrollTo(0, 0)');
      for (let presses = 0; presses < 25; presses++) {
        await page.keyboard.press('Tab');
        const ring = (await page.evaluate(RING)) as { name: string; contrast: number; width: number };
        // Past the last control the browser takes the focus to its own bar: the page's body, no control.
        if (ring.name.startsWith('body')) break;
        stops++;
        if (ring.contrast < 3 || ring.width < 2) weak.push({ hash, ...ring });
      }
    }
    await page.keyboard.press('Shift+Tab');
    await page.screenshot({ path: join(SHOTS, 'focus-ring.png') });
    expect(weak).to.deep.equal([]);
    expect(stops, 'Tab stops on the four pages').to.be.greaterThan(30);
    await page.context().close();
  });

  it('too many requests: a page says so in words, how long to wait, and offers Try again, which shows the page once the service takes it', async function () {
    // One read a second, two at once: signing in and the first page take both.
    const limited = await TestService.start({ routing: ROUTING, env: { READ_RATE_LIMIT_PER_SECOND: '1', READ_RATE_LIMIT_BURST: '2' } });
    try {
      const key = await limited.key('buyer', 'ca-buyer');
      const context = await browser!.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1280, height: 800 } });
      const page = await context.newPage();
      const limitedOrigin = `https://127.0.0.1:${limited.port}`;
      await page.goto(`${limitedOrigin}/console`);
      await page.getByLabel('API key').fill(key);
      await page.getByLabel('API key').press('Enter');
      await page.locator('#bought-message', { hasText: 'No leads bought yet.' }).waitFor();
      for (const hash of ['#/pulls', `#/leads/${leads.sold}`]) {
        // The key's reads spent first, until one is refused, so that the page is refused as it opens.
        for (let spent = 0; (await limited.request('GET', '/functions/me', { 'x-api-key': key })).status !== 429; spent++) {
          expect(spent, 'a read refused within a few').to.be.lessThan(10);
        }
        await page.goto(`${limitedOrigin}/console${hash}`);
        const failed = page.locator('#page-failed');
        await failed.waitFor();
        expect(await failed.innerText(), hash).to.equal('Too many requests from this key: wait 1 second and try again.');
        expect(await failed.getAttribute('role')).to.equal('alert');
        expect(await page.locator('main').innerText()).to.not.contain('{');
        // Nothing still says the page is loading.
        expect(await page.locator('main', { hasText: 'Loading' }).count(), hash).to.equal(0);
        expect(await page.evaluate('document.activeElement.id')).to.equal('page-retry');
        await page.screenshot({ path: join(SHOTS, 'too-many-requests.png') });
        // Enter on the focused button asks again; refused again, it says so again, until a read is let through.
        // As a reader would, it waits as long as it was told first: the bucket refills at one read a
        // second, and a page needs two reads at once, so a retry sent sooner spends the one read that
        // came back and is refused again (pressed at once, it could be refused every time).
        for (let tries = 0; ; tries++) {
          expect(tries, 'a read let through within a few tries').to.be.lessThan(5);
          await page.waitForTimeout(2_100);
          await page.keyboard.press('Enter');
          const shown = page.locator(hash === '#/pulls' ? 'main [role="status"]:has-text("No pending pulls")' : '#lead-message:has-text("not found")');
          await page.locator('#page-failed').or(shown).first().waitFor();
          if (await shown.count()) break;
          await page.locator('#page-retry').focus();
        }
        expect(await page.locator('#page-failed').count()).to.equal(0);
      }
      await context.close();
    } finally {
      await limited.stop();
    }
  });

  it('a buyer is offered no return on a lead sold longer ago than its return window: the page says why instead', async function () {
    // The service's clock: ten days back while the lead is posted and sold, then now.
    let behind = 10 * 86_400_000;
    const old = await TestService.start({ routing: ROUTING, now: () => new Date(Date.now() - behind) });
    try {
      const supplier = await old.key('supplier', 'sup-a');
      const buyer = await old.key('buyer', 'ca-buyer');
      const sold = (await old.post(validLead(), { 'x-api-key': supplier })).body;
      expect(sold.code).to.equal('SOLD');
      behind = 0;
      const fresh = (await old.post(validLead(), { 'x-api-key': supplier })).body;
      await old.service.projections.waitFor(await old.service.store.headPosition());
      const context = await browser!.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1280, height: 800 } });
      const page = await context.newPage();
      const oldOrigin = `https://127.0.0.1:${old.port}`;
      await page.goto(`${oldOrigin}/console`);
      await page.getByLabel('API key').fill(buyer);
      await page.getByLabel('API key').press('Enter');
      await page.locator('#bought-table tbody tr').first().waitFor();
      await page.goto(`${oldOrigin}/console#/leads/${sold.lead_id}`);
      await page.locator('#timeline').waitFor();
      expect(await page.locator('#return-form').count()).to.equal(0);
      expect(await page.locator('#window-closed-note').innerText()).to.match(/^Past the return window\n+This lead was sold to you on \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC: your return window is 7 days after the sale, so it can no longer be returned\.$/);
      await page.screenshot({ path: join(SHOTS, 'return-window-closed.png') });
      // A lead sold today still has its form.
      await page.goto(`${oldOrigin}/console#/leads/${fresh.lead_id}`);
      await page.locator('#return-form').waitFor();
      expect(await page.locator('#window-closed-note').count()).to.equal(0);
      await context.close();
    } finally {
      await old.stop();
    }
  });

  /** Every event type the service writes, as it writes them: shown bare, outside a code element, it is the console's jargon. */
  const EVENT_TYPES = /\b(Lead[A-Z][A-Za-z]+|Ping[A-Z][A-Za-z]+|FeedbackRecorded|ErasureNotice[A-Z][a-z]+)\b/;

  it("a lead's timeline, checks, delivery and feedback read as words, each code at hand; a code the console does not know shows as written", async function () {
    const returned = await svc!.post({ type: 'return', reason: 'bad_phone' }, { 'x-api-key': keys.buyer! }, `/functions/leads/${leads.sold}/feedback`);
    expect(returned.status, JSON.stringify(returned.body)).to.be.within(200, 299);
    // The webhook buyer nobody listens for: its one attempt fails, for good.
    await until(
      'the delivery of the unheard webhook buyer failed',
      async () => {
        const reply = await svc!.request('GET', `/functions/leads/${leads.hooked}`, { 'x-api-key': keys.admin! });
        return (reply.body.lead as { delivery?: { status: string } }).delivery?.status === 'failed';
      },
      15_000,
      100,
    );
    await svc!.service.projections.waitFor(await svc!.service.store.headPosition());
    const page = await signedIn(keys.admin!);

    await page.goto(`${origin}/console#/leads/${leads.hooked}`);
    const timeline = page.locator('#timeline');
    await timeline.locator('[data-type="LeadDeliveryFailed"]').waitFor();
    const items = timeline.locator(':scope > li');
    expect(await items.locator('.type').allInnerTexts()).to.deep.equal(['Received', 'Checked', 'Routed', 'Sold', 'Delivery attempt 1', 'Delivery attempt 1 failed']);
    // Each type as the API writes it, beside its words and as their tooltip.
    const types = await items.evaluateAll((lis) => lis.map((li) => li.getAttribute('data-type')));
    expect(await items.locator('code.code').allInnerTexts()).to.deep.equal(types);
    expect(await items.locator('.type').evaluateAll((spans) => spans.map((span) => span.getAttribute('title')))).to.deep.equal(types);
    // Each check: its name, what it found in words (each code its tooltip), and who answered.
    const phone = timeline.locator('[data-check="phone"]');
    expect(await phone.innerText()).to.match(/^Phone: Passed \([a-z ]+\), by \S+$/);
    expect(await phone.locator('[data-code="pass"]').getAttribute('title')).to.equal('pass');
    expect(await timeline.locator('[data-check="email"]').innerText()).to.match(/^E-mail: (Passed|Failed|Not known) \([a-z ]+\), by \S+$/);
    expect(await timeline.locator('[data-check="consent"]').innerText()).to.match(/^Consent: Passed \(certificate format ok\), by \S+$/);
    // The outcome's checks and delivery, in the same words.
    const summary = await page.locator('#lead-summary').innerText();
    expect(summary).to.match(/Checks\nPhone: Passed; E-mail: (Passed|Failed|Not known); Consent: Passed\n/);
    expect(await page.locator('#lead-summary [data-code="pass"]').first().getAttribute('title')).to.equal('pass');
    expect(summary).to.contain('Delivery\nFailed, 1 attempt\n');
    expect(await page.locator('#lead-summary [data-code="failed"]').getAttribute('title')).to.equal('failed');
    const bare = (pattern: RegExp) =>
      page.evaluate(`(() => {
        const found = [];
        const walker = document.createTreeWalker(document.querySelector('main'), NodeFilter.SHOW_TEXT);
        while (walker.nextNode()) {
          const el = walker.currentNode.parentElement;
          if (el.closest('code.code, option, [hidden]') || !el.checkVisibility()) continue;
          if (${pattern}.test(walker.currentNode.textContent)) found.push(walker.currentNode.textContent.trim());
        }
        return found;
      })()`) as Promise<string[]>;
    // Nor a status, a check's result or an error as the API writes them (a snake_case word is one).
    expect(await bare(EVENT_TYPES)).to.deep.equal([]);
    expect(await bare(/\b(pass|fail|pending|delivered|cancelled|unknown|[a-z]+_[a-z_]+)\b/)).to.deep.equal([]);
    expect(await timeline.locator('[data-type="LeadDeliveryFailed"] p').innerText()).to.equal('Attempt 1 to fl-hook failed: could not connect. No more attempts.');
    expect(await timeline.locator('[data-type="LeadDeliveryFailed"] [data-code="connection_error"]').getAttribute('title')).to.equal('connection_error');
    await page.screenshot({ path: join(SHOTS, 'words-timeline.png'), fullPage: true });

    // The sold lead, returned: its feedback and return in words, "return (bad_phone)" at hand.
    await page.goto(`${origin}/console#/leads/${leads.sold}`);
    await timeline.locator('[data-type="LeadReturned"]').waitFor();
    expect(await timeline.locator('[data-type="FeedbackRecorded"] .type').innerText()).to.equal('Feedback');
    expect(await timeline.locator('[data-type="FeedbackRecorded"] p').innerText()).to.equal('ca-buyer: Returned: bad phone return (bad_phone).');
    expect(await timeline.locator('[data-type="LeadReturned"] p').innerText()).to.match(/^Returned by ca-buyer \(bad phone\): 40\.00 USD reversed\.$/);
    expect(await bare(EVENT_TYPES)).to.deep.equal([]);
    expect(await bare(/\b(pending|return|bad_phone)\b/)).to.deep.equal([]);

    // Deliveries: each status in words, its code the tooltip; the filter offers the words, sends the codes.
    await page.goto(`${origin}/console#/deliveries`);
    const row = page.locator(`#deliveries-table tr[data-lead="${leads.hooked}"]`);
    await row.waitFor();
    expect(await row.locator('td').nth(3).innerText()).to.equal('Failed Send again');
    expect(await row.locator('td [data-code="failed"]').getAttribute('title')).to.equal('failed');
    // Why the last attempt failed, in words, the error as written their tooltip as on the lead's page.
    expect(await row.locator('td').nth(6).innerText()).to.equal('could not connect');
    expect(await row.locator('td').nth(6).locator('[data-code="connection_error"]').getAttribute('title')).to.equal('connection_error');
    // The sold lead, returned before its buyer pulled it: its delivery cancelled, not left pending.
    expect(await page.locator(`#deliveries-table tr[data-lead="${leads.sold}"] td`).nth(3).innerText()).to.equal('Cancelled');
    const status = page.getByLabel('Status');
    expect(await status.locator('option').evaluateAll((os) => os.map((o) => [o.getAttribute('value'), o.textContent]))).to.deep.equal([
      ['', 'Any'], ['pending', 'Pending'], ['delivered', 'Delivered'], ['failed', 'Failed'], ['cancelled', 'Cancelled'],
    ]);
    expect(await bare(/\b(pending|failed|delivered|cancelled)\b/)).to.deep.equal([]);
    await page.screenshot({ path: join(SHOTS, 'words-deliveries.png'), fullPage: true });

    // A code the console has no words for yet still shows: as the service writes it, never blank.
    const unknown = await page.evaluate(`import('/console/words.js').then((w) => {
      const text = (shown) => { const p = document.createElement('p'); p.append(...[shown].flat(Infinity)); return p.textContent; };
      return {
      event: w.eventWords({ type: 'LeadTeleported', data: {} }),
      attempt: w.eventWords({ type: 'LeadDeliveryAttempted', data: {} }),
      status: w.deliveryStatusWords('parked'),
      shown: w.deliveryStatusShown('parked').textContent,
      feedback: w.feedbackShown({ type: 'praise', reason: 'great_lead' }).textContent,
      check: w.checkWords('address') + ': ' + text(w.checkShown({ result: 'maybe', detail: 'odd_answer', provider: 'x' })),
      code: w.codeWords('NEW_CODE'),
      lead: w.statusWords('parked'),
      redirect: w.deliveryErrorWords('http_3xx'),
      pulling: w.deliveryErrorWords('not_webhook'),
    }; })`);
    expect(unknown).to.deep.equal({
      event: 'LeadTeleported',
      attempt: 'Delivery attempt',
      status: 'parked',
      shown: 'parked',
      feedback: 'praise: great lead praise (great_lead)',
      check: 'address: maybe (odd answer)',
      code: 'NEW CODE',
      lead: 'parked',
      redirect: 'redirected (not followed)',
      pulling: 'the buyer takes no webhooks now',
    });
    await page.context().close();

    // The buyer's bought leads: delivery and feedback in the same words.
    const buyer = await signedIn(keys.buyer!);
    const bought = buyer.locator(`#bought-table tr[data-lead="${leads.sold}"] td`);
    await bought.first().waitFor();
    const cells = await bought.allInnerTexts();
    expect(cells.slice(5)).to.deep.equal(['Cancelled', 'Returned: bad phone return (bad_phone)']);
    await buyer.screenshot({ path: join(SHOTS, 'words-bought.png'), fullPage: true });
    await buyer.context().close();
  });
  it('every table has a name a screen reader announces and a heading over each of its columns', async function () {
    // A lead sold to the pull buyer and not yet taken: its pulls have a row.
    expect((await svc!.post(validLead(), { 'x-api-key': keys.supplier! })).body.code).to.equal('SOLD');
    await svc!.service.projections.waitFor(await svc!.service.store.headPosition());
    const consumer = (await svc!.request('GET', `/functions/leads/${leads.sold}`, { 'x-api-key': keys.admin! })).body.lead as { lead: { email: string } };
    const problems: string[] = [];
    const names: string[] = [];
    /** Each table shown in the page: its name as Chromium gives it to a screen reader, and its column headings. */
    const tables = async (page: Page, where: string) => {
      for (const table of await page.locator('main table').all()) {
        if (!(await table.isVisible())) continue;
        const tree = await table.ariaSnapshot();
        const name = /^- table "(.+?)"/.exec(tree)?.[1];
        names.push(name ?? '');
        const columns = await table.evaluate((t: any) => ({
          heads: t.tHead ? [...t.tHead.rows[0].cells].map((th: any) => `${th.tagName} ${th.getAttribute('scope')}`) : [],
          widest: Math.max(...[...t.rows].map((row: any) => row.cells.length)),
        }));
        const headers = [...tree.matchAll(/^\s*- columnheader(?: "(.*?)")?:?$/gm)].map((m) => m[1] ?? '');
        const what = `${where}: ${name ?? (await table.evaluate((t: any) => t.outerHTML.slice(0, 80)))}`;
        if (!name) problems.push(`${what}: no name`);
        if (columns.heads.length !== columns.widest || columns.heads.some((head) => head !== 'TH col')) problems.push(`${what}: headings ${JSON.stringify(columns.heads)} over ${columns.widest} columns`);
        if (headers.length !== columns.widest || headers.some((header) => !header)) problems.push(`${what}: column headers heard ${JSON.stringify(headers)}`);
      }
    };
    const admin = await signedIn(keys.admin!);
    // What each page draws last, waited for before its tables are read: a table drawn later would
    // be missed (the leads page's two cards come from two calls, in either order).
    for (const [hash, shown] of [
      ['#/leads', ['#rejections-by-field table', '#rejections-by-code[data-totals] table']],
      ['#/report', ['#report-table']],
      ['#/deliveries', ['#deliveries-table tbody tr']],
      [`#/leads/${leads.hooked}`, ['#timeline table']],
    ] as const) {
      await admin.goto(`${origin}/console${hash}`);
      for (const selector of shown) await admin.locator(selector).first().waitFor();
      // Its lists loaded (a lead's page: its timeline, drawn once it has loaded).
      await admin.locator('main [role="status"]:not(:has-text("Loading")), #timeline').first().waitFor();
      await tables(admin, hash);
    }
    await admin.goto(`${origin}/console#/personal-data`);
    await admin.locator('form[aria-labelledby="find-title"]').getByLabel('E-mail').fill(consumer.lead.email);
    await admin.locator('form[aria-labelledby="find-title"]').getByRole('button', { name: 'Find' }).click();
    await admin.locator('#consumer-leads tbody tr').first().waitFor();
    await tables(admin, '#/personal-data');
    await admin.goto(`${origin}/console#/leads`);
    await admin.locator('#rejections-by-field table').waitFor();
    await admin.screenshot({ path: join(SHOTS, 'tables-leads.png'), fullPage: true });
    await admin.context().close();

    const buyer = await signedIn(keys.buyer!);
    await buyer.locator('#bought-table tbody tr').first().waitFor();
    await tables(buyer, '#/bought');
    await buyer.goto(`${origin}/console#/pulls`);
    await buyer.locator('#pulls-table tbody tr').first().waitFor();
    await tables(buyer, '#/pulls');
    await buyer.screenshot({ path: join(SHOTS, 'tables-pulls.png'), fullPage: true });
    await buyer.context().close();

    expect(problems).to.deep.equal([]);
    expect(names).to.include.members(['Leads', 'Rejected leads by code', 'Rejected leads by field', 'Rows', 'Deliveries', 'Routing candidates', "The consumer's leads", 'Bought leads', 'Pending pulls']);
  });
  it("a lead's page says, in its status line, that the lead is loading, then that it is shown or not found", async function () {
    const context = await browser!.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1280, height: 800 } });
    // What the page's live regions say, in order, each change once: what a screen reader is given to announce.
    await context.addInitScript(`
      window.heard = [];
      const said = new WeakMap();
      new MutationObserver(() => {
        for (const region of document.querySelectorAll('main [role="status"], main [role="alert"], main [aria-live]')) {
          const text = region.textContent.trim();
          if (text && said.get(region) !== text) window.heard.push(text);
          said.set(region, text);
        }
      }).observe(document, { subtree: true, childList: true, characterData: true });
    `);
    const page = await context.newPage();
    await page.goto(`${origin}/console`);
    await page.getByLabel('API key').fill(keys.admin!);
    await page.getByLabel('API key').press('Enter');
    await page.locator('#nav a').first().waitFor();

    await page.goto(`${origin}/console#/leads/${leads.duplicate}`);
    const status = page.locator('#lead-message');
    await status.filter({ hasText: 'shown' }).waitFor();
    expect(await status.getAttribute('role')).to.equal('status');
    const heard = async () => ((await page.evaluate('window.heard.splice(0)')) as string[]).filter((text) => /^Lead|^Loading lead/.test(text));
    expect(await heard()).to.deep.equal([`Loading lead ${leads.duplicate}…`, `Lead ${leads.duplicate} shown: rejected, 2 events in its timeline.`]);
    await page.screenshot({ path: join(SHOTS, 'lead-status.png') });

    await page.goto(`${origin}/console#/leads/999999999`);
    await status.filter({ hasText: 'not found' }).waitFor();
    expect(await status.getAttribute('class')).to.contain('error');
    expect(await heard()).to.deep.equal(['Loading lead 999999999…', 'Lead 999999999 not found: there is no such lead, or this key may not see it.']);
    // An id no lead could have is not asked for: said at once.
    await page.goto(`${origin}/console#/leads/lead-7`);
    await status.filter({ hasText: 'not found' }).waitFor();
    expect(await heard()).to.deep.equal(['Lead lead-7 not found: there is no such lead, or this key may not see it.']);
    await context.close();
  });
  it('a CSV download the service refuses for now (429) says how long to wait, from its Retry-After', async function () {
    // Enough reads at once for the report to be shown, one a second after that.
    const limited = await TestService.start({ routing: ROUTING, env: { READ_RATE_LIMIT_PER_SECOND: '1', READ_RATE_LIMIT_BURST: '8' } });
    try {
      const key = await limited.key('analyst', 'ann');
      // A lead for the report to have a row.
      await limited.post(validLead(), { 'x-api-key': await limited.key('supplier', 'sup-a') });
      await limited.service.projections.waitFor(await limited.service.store.headPosition());
      const context = await browser!.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1280, height: 800 }, acceptDownloads: true });
      const page = await context.newPage();
      const limitedOrigin = `https://127.0.0.1:${limited.port}`;
      await page.goto(`${limitedOrigin}/console#/report`);
      await page.getByLabel('API key').fill(key);
      await page.getByLabel('API key').press('Enter');
      const download = page.getByRole('button', { name: 'Download CSV' });
      await page.locator('#report-table').waitFor();
      // The report was let through: whatever the status line says of too many requests is the download's.
      expect(await page.locator('#report-status').innerText()).to.not.contain('Too many requests');
      // Each click asks once more, until one is refused.
      let wait: string | null = null;
      for (let tries = 0; wait === null; tries++) {
        expect(tries, 'a CSV refused within a few clicks').to.be.lessThan(20);
        const [answer] = await Promise.all([
          page.waitForResponse((r) => r.url().includes('/functions/reports/summary') && r.request().headers().accept === 'text/csv'),
          download.click(),
        ]);
        if (answer.status() === 429) wait = (await answer.allHeaders())['retry-after'] ?? null;
      }
      const seconds = Number(wait);
      expect(seconds).to.be.greaterThan(0);
      await page.locator('#report-status', { hasText: `Too many requests from this key: wait ${seconds} second${seconds === 1 ? '' : 's'} and try again.` }).waitFor();
      expect(await page.locator('#report-status').getAttribute('class')).to.contain('error');
      await page.screenshot({ path: join(SHOTS, 'csv-too-many-requests.png') });
      await context.close();
    } finally {
      await limited.stop();
    }
  });

  it('an attempt the service cut short as it stopped reads as such on the timeline, not as the buyer failing', async function () {
    const reply = await svc!.post(validLead({ sid: 'google' }), { 'x-api-key': keys.supplier! });
    expect(reply.body.code, reply.text).to.equal('SOLD');
    const leadId = reply.body.lead_id as number;
    const at = new Date().toISOString();
    const attempt = { lead_id: leadId, buyer: 'ca-buyer', attempt: 1 };
    const next = new Date(Date.now() + 60_000).toISOString();
    await svc!.service.store.append(leadStream(leadId), [
      { type: 'LeadDeliveryAttempted', data: { ...attempt, started_at: at, timeout_ms: 5000 } },
      { type: 'LeadDeliveryFailed', data: { ...attempt, status: null, latency_ms: 3000, error: 'connection_error', next_attempt_at: next, failed_at: at, interrupted: true } },
    ]);
    const page = await signedIn(keys.admin!);
    await page.goto(`${origin}/console#/leads/${leadId}`);
    const failed = page.locator('#timeline [data-type="LeadDeliveryFailed"] p');
    await failed.waitFor();
    expect(await failed.innerText()).to.match(/^Attempt 1 to ca-buyer failed: could not connect, cut short as the service stopped \(not counted\)\. Next attempt .+\.$/);
    await page.context().close();
  });
});
