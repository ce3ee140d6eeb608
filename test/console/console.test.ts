import { expect } from 'chai';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { type Browser, type BrowserContext, type Page } from 'playwright-core';
import { launchChromium, skipWithoutChromium } from '../support/chromium.js';
import { TestService, leadWith, testMobile, validLead } from '../support/service.js';
import { until } from '../support/until.js';
import { BuyerEndpoint } from '../delivery/buyer-endpoint.js';

// The console in a real browser against the running service, real keys and real leads: an
// analyst signs in, the report's charts and table hold exactly what the report API answers, a
// delivery row opens its lead's timeline with every routing candidate and its reason, and signing
// out forgets the key; an admin finds a consumer and erases it. Any console error, page error, CSP violation or request to another origin
// fails the test. Screenshots of each page at a laptop's and a phone's size go to SHOTS.

const SHOTS = 'test-results/console';
const SIZES = { laptop: { width: 1280, height: 800 }, phone: { width: 390, height: 844 } } as const;
/** A buyer's id as long as the routing file takes one. */
const LONG_BUYER = 'a-buyer-whose-id-is-as-long-as-the-routing-file-takes-0123456789';
const routingWith = (refusingUrl: string) => ({
  buyers: [
    { id: 'ca-buyer', price: 40, states: ['CA'], return_reasons: ['bad_phone', 'fraud'] },
    { id: 'ny-buyer', price: 30.5, states: ['NY'] },
    // A webhook buyer nobody listens for (port 1): each attempt fails to connect and is retried.
    { id: 'fl-hook', price: 25, states: ['FL'], delivery: { kind: 'webhook', url: 'https://127.0.0.1:1/leads', timeout_ms: 2000, max_attempts: 8 } },
    // A webhook buyer that answers every delivery 422: refused, for good.
    { id: 'az-refuses', price: 20, states: ['AZ'], delivery: { kind: 'webhook', url: refusingUrl, timeout_ms: 2000, max_attempts: 8 } },
    { id: LONG_BUYER, price: 33, states: ['WA'] },
  ],
  buckets: [{ id: 'unsold', default: true }],
});

type Totals = Record<string, number>;

/** A time as the console shows every time: UTC to the second, the zone written. */
const utc = (iso: string) => `${new Date(iso).toISOString().slice(0, 19).replace('T', ' ')} UTC`;
const UTC_TIME = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/;
/** The console's error colour (--bad in console.css), as the browser computes it. */
const ERROR_COLOUR = 'rgb(179, 38, 30)';
/** Chromium's own line for a request the page made and the service refused with `status`. */
const refused = (status: string) => `console: Failed to load resource: the server responded with a status of ${status}`;

function sum(rows: Array<Record<string, unknown>>, fields: readonly string[]): Totals {
  const totals: Totals = {};
  for (const field of fields) totals[field] = Math.round(rows.reduce((s, row) => s + (typeof row[field] === 'number' ? (row[field] as number) : 0), 0) * 100) / 100;
  return totals;
}

describe('the console in a browser', function () {
  this.timeout(120_000);
  let svc: TestService | undefined;
  let refusing: BuyerEndpoint | undefined;
  /** Leads the refusing buyer takes after all, once it has fixed its side: it answers them 200. */
  const takenNow = new Set<number>();
  let browser: Browser | undefined;
  let origin: string;
  const keys: Record<string, string> = {};
  const leads: Record<string, number> = {};

  before(async function () {
    skipWithoutChromium(this);
    refusing = await BuyerEndpoint.start((r) => (takenNow.has(r.body.lead_id as number) ? 200 : 422));
    svc = await TestService.start({ routing: routingWith(refusing.url), buyerCa: refusing.cert });
    origin = `https://127.0.0.1:${svc.port}`;
    keys.supA = await svc.key('supplier', 'sup-a');
    keys.supB = await svc.key('supplier', 'sup-b');
    keys.analyst = await svc.key('analyst', 'ann');
    keys.caBuyer = await svc.key('buyer', 'ca-buyer');
    const post = async (name: string, key: string, lead: Record<string, unknown>) => {
      leads[name] = (await svc!.post(lead, { 'x-api-key': key })).body.lead_id as number;
    };
    await post('caSold', keys.supA, validLead({ sid: 'google' }));
    await post('caSold2', keys.supA, validLead({ sid: 'google' }));
    await post('nySold', keys.supA, validLead({ accident_state: 'NY', zip: '10001', sid: 'bing' }));
    await post('txUnsold', keys.supB, validLead({ accident_state: 'TX', zip: '75001', sid: 'meta' }));
    await post('invalid', keys.supB, validLead({ zip: 'bad', sid: 'meta' }));
    await svc.service.projections.waitFor(await svc.service.store.headPosition());
    browser = await launchChromium(SHOTS);
  });
  after(async () => {
    await browser?.close();
    await svc?.stop();
    await refusing?.stop();
  });

  /** A page that records everything the test must fail on. */
  async function watched(context: BrowserContext): Promise<{ page: Page; problems: string[]; elsewhere: string[] }> {
    const page = await context.newPage();
    const problems: string[] = [];
    const elsewhere: string[] = [];
    page.on('request', (req) => {
      const url = req.url();
      if (!url.startsWith(origin) && !url.startsWith('data:') && !url.startsWith('blob:')) elsewhere.push(url);
    });
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error' || /Content.Security.Policy/i.test(message.text())) problems.push(`console: ${message.text()}`);
    });
    // Added by the browser driver, not the page, so the page's CSP does not apply to it.
    await page.addInitScript(
      "document.addEventListener('securitypolicyviolation', (event) => console.error('CSP violation: ' + event.violatedDirective + ' ' + event.blockedURI))",
    );
    return { page, problems, elsewhere };
  }

  /** Screenshots of the page at each size; at a phone's, once it reads there (PHONE_PROBLEMS). */
  async function shoot(page: Page, name: string, ready: () => Promise<unknown>): Promise<void> {
    for (const [size, viewport] of Object.entries(SIZES)) {
      await page.setViewportSize(viewport);
      await ready();
      if (size === 'phone') expect(await phoneProblems(page), `${name} at a phone's width`).to.deep.equal([]);
      await page.screenshot({ path: join(SHOTS, `${name}-${size}.png`), fullPage: true });
    }
    await page.setViewportSize(SIZES.laptop);
  }

  /**
   * How a table reads in the window, as the problems found, in words: no box around it scrolls
   * sideways, and every cell with something in it is shown, whole, inside the window and inside
   * every box that clips it (none left out). Run in the page, on a table.
   */
  const TABLE_FITS = `(table) => {
    const problems = [];
    const width = document.documentElement.clientWidth;
    for (let box = table; box && box !== document.body; box = box.parentElement) {
      if (box.scrollWidth > box.clientWidth + 1 && getComputedStyle(box).overflowX !== 'visible') problems.push('scrolls sideways: ' + box.tagName.toLowerCase() + '.' + box.className + ', ' + box.scrollWidth + ' px in ' + box.clientWidth);
    }
    // What a box that scrolls or clips shows of its content: inside its borders, left of its scrollbar.
    const clippers = [];
    for (let box = table.parentElement; box && box !== document.body; box = box.parentElement) {
      if (getComputedStyle(box).overflowX === 'visible') continue;
      const left = box.getBoundingClientRect().left + box.clientLeft;
      clippers.push({ left, right: left + box.clientWidth });
    }
    const heads = table.tHead ? [...table.tHead.rows[0].cells].map((th) => th.textContent) : [];
    for (const tr of table.querySelectorAll(':scope > tbody > tr, :scope > tfoot > tr')) {
      [...tr.cells].forEach((td, i) => {
        if (td.textContent.trim() === '') return;
        const r = td.getBoundingClientRect();
        const where = (table.id || table.getAttribute('aria-label')) + ', ' + (tr.dataset.lead || tr.id || tr.cells[0].textContent.trim()) + ', ' + (heads[i] || 'column ' + i) + ' (' + td.textContent.trim() + ')';
        if (!td.checkVisibility() || r.width === 0) problems.push('left out: ' + where);
        else if (r.left < -0.5 || r.right > width + 0.5) problems.push('past the window (' + Math.round(r.left) + '..' + Math.round(r.right) + ' px): ' + where);
        else if (clippers.some((box) => r.left < box.left - 0.5 || r.right > box.right + 0.5)) problems.push('cut off by its box: ' + where);
      });
    }
    return problems;
  }`;

  /** PHONE_PROBLEMS once the page has settled at its new width (a chart redraws a few frames after it changes): none, or the last found. */
  async function phoneProblems(page: Page): Promise<string[]> {
    const deadline = Date.now() + 3000;
    for (;;) {
      const problems = (await page.evaluate(PHONE_PROBLEMS)) as string[];
      if (problems.length === 0 || Date.now() > deadline) return problems;
      await page.waitForTimeout(100);
    }
  }

  /**
   * What keeps a page readable at a phone's width, as the problems found, in words: the page itself
   * never scrolls sideways; every button and link of the header and the page (the filters' submit
   * and a row's buttons among them) is on screen, whole and not covered, with the window scrolled
   * down to it (never sideways); and no table scrolls sideways either, each cell of it on screen
   * (TABLE_FITS). Run in the page, as text.
   */
  const PHONE_PROBLEMS = `(() => {
    const problems = [];
    const width = window.innerWidth;
    const what = (el) => el.outerHTML.slice(0, 90);
    const clipper = (el) => {
      for (let box = el.parentElement; box && box !== document.body; box = box.parentElement) if (getComputedStyle(box).overflowX !== 'visible') return box;
      return null;
    };
    if (document.documentElement.scrollWidth > width) {
      const out = [...document.querySelectorAll('body *')].filter((el) => el.getBoundingClientRect().right > width + 0.5 && clipper(el) === null);
      problems.push('the page is ' + document.documentElement.scrollWidth + ' px wide in a ' + width + ' px window, past it: ' + out.slice(0, 3).map(what).join(' | '));
    }
    const onScreen = (el) => {
      window.scrollTo(0, Math.max(0, el.getBoundingClientRect().top + window.scrollY - window.innerHeight / 2));
      const r = el.getBoundingClientRect();
      if (r.width === 0 || r.height === 0 || r.left < -0.5 || r.right > width + 0.5) return false;
      for (let box = clipper(el); box; box = clipper(box)) {
        const left = box.getBoundingClientRect().left + box.clientLeft;
        if (r.left < left - 0.5 || r.right > left + box.clientWidth + 0.5) return false;
      }
      const hit = document.elementFromPoint((r.left + r.right) / 2, (r.top + r.bottom) / 2);
      return hit !== null && el.contains(hit);
    };
    const shown = (el) => el.checkVisibility();
    for (const el of document.querySelectorAll('header a, header button, main button, main a[href]')) {
      if (shown(el) && !onScreen(el)) problems.push('off screen: ' + what(el));
    }
    for (const table of document.querySelectorAll('main table')) if (shown(table)) problems.push(...(${TABLE_FITS})(table));
    window.scrollTo(0, 0);
    return problems;
  })()`;

  /**
   * The accessible name of an element, as a screen reader announces it (aria-label, then
   * aria-labelledby, then its <label>s; a link's or button's own text). Controls, tables and charts
   * get no name from their content, so an unlabelled one has none. Run in the page, as text.
   */
  const NAME = `(el) => {
    if (!el) return '';
    if (el.tagName === 'MAIN' || el.tagName === 'BODY') return el.tagName.toLowerCase();
    const aria = el.getAttribute('aria-label');
    if (aria && aria.trim()) return aria.trim();
    const by = el.getAttribute('aria-labelledby');
    if (by) return by.split(' ').map((id) => document.getElementById(id)?.textContent ?? '').join(' ').trim();
    if (el.labels && el.labels.length > 0) return [...el.labels].map((label) => label.textContent).join(' ').trim();
    if (el.tagName === 'TABLE' && el.caption) return el.caption.textContent.trim();
    if (['INPUT', 'SELECT', 'TEXTAREA', 'TABLE', 'CANVAS'].includes(el.tagName)) return '';
    return el.textContent.trim();
  }`;

  /** Every control, link, table and chart shown that has no name (the skip link counts as shown). */
  const unnamed = (page: Page) =>
    page.evaluate(
      `[...document.querySelectorAll('input, select, textarea, button, a[href], table, canvas')].filter((el) => !el.closest('[hidden]') && !(${NAME})(el)).map((el) => el.outerHTML.slice(0, 160))`,
    );

  /** The name of what has the keyboard's focus. */
  const focused = (page: Page) => page.evaluate(`(${NAME})(document.activeElement)`) as Promise<string>;

  /**
   * Presses Tab until the focus is on the control named `name`, as a keyboard user would; the names
   * the focus passed on the way, each once (a date field takes a Tab per part of the date).
   */
  async function tabTo(page: Page, name: string): Promise<string[]> {
    const passed: string[] = [];
    for (let presses = 0; presses < 60; presses++) {
      await page.keyboard.press('Tab');
      const now = await focused(page);
      if (passed.at(-1) !== now) passed.push(now);
      if (now === name) return passed;
    }
    throw new Error(`Tab never reached '${name}'; it went through ${JSON.stringify(passed)}`);
  }

  it('an analyst signs in by keyboard; the report, a lead from the deliveries and sign-out work and match the API', async function () {
    const context = await browser!.newContext({ ignoreHTTPSErrors: true, viewport: SIZES.laptop, acceptDownloads: true });
    const { page, problems, elsewhere } = await watched(context);

    const response = await page.goto(`${origin}/console`);
    expect(response?.status()).to.equal(200);
    expect(response?.headers()['content-security-policy']).to.contain("style-src 'self';").and.contain("script-src 'self';").and.not.contain('unsafe');
    // The README's console section documents the policy the service sends, word for word.
    expect(/The page runs under\s+`([^`]+)`/.exec(readFileSync('README.md', 'utf8'))?.[1], 'README').to.equal(response?.headers()['content-security-policy']);
    const keyInput = page.getByLabel('API key');
    await keyInput.waitFor();
    expect(await page.locator('#nav').isVisible(), 'no pages before signing in').to.equal(false);
    await shoot(page, 'sign-in', () => keyInput.waitFor());
    expect(await unnamed(page)).to.deep.equal([]);

    // A wrong key is refused and not kept.
    await keyInput.fill('lp_nope_nope');
    await keyInput.press('Enter');
    await page.getByRole('alert').filter({ hasText: 'not accepted' }).waitFor();
    expect(await page.evaluate('sessionStorage.length')).to.equal(0);
    // Chromium logs the refused request itself; that one line is expected, nothing else.
    expect(problems).to.deep.equal(['console: Failed to load resource: the server responded with a status of 401 (Unauthorized)']);
    problems.length = 0;
    await keyInput.fill(keys.analyst!);
    await keyInput.press('Enter');

    // The report: the charts and the table hold the report API's totals for the same query.
    const daily = page.locator('#chart-daily[data-totals]');
    await daily.waitFor();
    await page.locator('#report-totals').waitFor();
    expect(await page.evaluate("sessionStorage.getItem('leadpost.apiKey')")).to.equal(keys.analyst);
    // The nav starts with the page the console started on: an analyst's home is the report.
    expect(await visibleNav(page)).to.deep.equal(['Report', 'Leads', 'Deliveries']);
    const query = new URLSearchParams({
      from: await page.getByLabel('From', { exact: true }).inputValue(),
      to: await page.getByLabel('To', { exact: true }).inputValue(),
      tz: await page.getByLabel('Time zone', { exact: true }).inputValue(),
    });
    const report = async (groupBy: string) => {
      const reply = await svc!.request('GET', `/functions/reports/summary?${query}&group_by=${groupBy}&limit=500`, { 'x-api-key': keys.analyst! });
      expect(reply.status).to.equal(200);
      return reply.body.items as Array<Record<string, unknown>>;
    };
    const byDay = sum(await report('day'), ['received', 'accepted', 'sold', 'revenue']);
    const bySid = await report('sid');
    expect(byDay).to.deep.equal({ received: 5, accepted: 4, sold: 3, revenue: 110.5 });
    expect(JSON.parse((await daily.getAttribute('data-totals'))!)).to.deep.equal(byDay);
    expect(JSON.parse((await page.locator('#chart-groups').getAttribute('data-totals'))!)).to.deep.equal(sum(bySid, ['received', 'sold']));
    const footer: Totals = {};
    for (const field of ['received', 'accepted', 'sold', 'unsold', 'rejected', 'returned', 'revenue', 'net_revenue']) {
      footer[field] = Number((await page.locator(`#report-totals [data-field="${field}"]`).innerText()).replaceAll(',', ''));
    }
    expect(footer).to.deep.equal(sum(bySid, Object.keys(footer)));
    expect(await page.locator('#report-table tbody tr').count()).to.equal(bySid.length);
    // Its columns in words, money with its currency (the routing file's: USD by default).
    expect(await page.locator('#report-table thead th').allInnerTexts()).to.deep.equal([
      'Source (sid)', 'Received', 'Accepted', 'Sold', 'Unsold', 'Rejected', 'Returned', 'Revenue (USD)', 'Net revenue (USD)', 'Acceptance rate', 'Sell rate', 'Average price (USD)',
    ]);
    expect(await page.locator('#readiness').innerText()).to.match(/^Ready · projection lag/);
    // The readiness line announces its state when it changes, not at every page: watched from here on.
    await page.evaluate(
      "window.announced = []; new MutationObserver((changes) => window.announced.push(...changes.map((c) => c.target.textContent))).observe(document.querySelector('header [role=\"status\"]'), { childList: true, characterData: true, subtree: true })",
    );
    expect(await unnamed(page)).to.deep.equal([]);

    // The CSV button downloads what the API gives as CSV.
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download CSV' }).click()]);
    const csv = await svc!.request('GET', `/functions/reports/summary?${query}&group_by=sid`, { 'x-api-key': keys.analyst!, accept: 'text/csv' });
    expect(readFileSync((await download.path())!, 'utf8')).to.equal(csv.text);
    expect(download.suggestedFilename()).to.equal(`leadpost-report-${query.get('from')}-${query.get('to')}-sid-${query.get('tz')!.replaceAll('/', '-')}.csv`);
    await shoot(page, 'report', () => daily.waitFor());

    // What a field says is wrong: in words, in the error colour, next to the field it is about.
    const fieldNote = (label: string) =>
      page.evaluate(`(() => {
        const control = [...document.querySelectorAll('main label')].find((l) => l.textContent === ${JSON.stringify(label)})?.control;
        const note = control && document.getElementById(control.getAttribute('aria-describedby') ?? '');
        return note ? { text: note.textContent, invalid: control.getAttribute('aria-invalid'), errorColour: getComputedStyle(note).color === ${JSON.stringify(ERROR_COLOUR)}, nextToIt: note.parentElement === control.parentElement } : null;
      })()`);
    const shownAs = (search: Record<string, string>) => `#/report?${new URLSearchParams(search)}`;
    // An address naming a zone and a grouping the report has not: the defaults are shown, the page
    // says so next to those fields, and the address then names the report shown.
    const zone = query.get('tz')!;
    await page.goto(`${origin}/console#/report?from=${query.get('from')}&to=${query.get('to')}&tz=Mars%2FOlympus&group_by=nope`);
    await page.waitForURL((url) => url.hash === shownAs({ from: query.get('from')!, to: query.get('to')!, tz: zone, group_by: 'sid' }));
    expect(await fieldNote('Time zone')).to.deep.equal({ text: `The address asked for time zone “Mars/Olympus”, which is not one: showing ${zone}.`, invalid: 'true', errorColour: true, nextToIt: true });
    expect(await fieldNote('Group by')).to.deep.equal({ text: 'The address asked to group by “nope”, which the report cannot: showing Source (sid).', invalid: 'true', errorColour: true, nextToIt: true });
    // From after To: refused by the service, said in words next to From; the address keeps naming the report still shown.
    const reportStatus = page.locator('#report-status');
    const dayAfter = new Date(Date.parse(`${query.get('to')}T00:00:00Z`) + 86_400_000).toISOString().slice(0, 10);
    await page.getByLabel('From', { exact: true }).fill(dayAfter);
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    await reportStatus.filter({ hasText: 'This report cannot be shown' }).waitFor();
    expect(await fieldNote('From')).to.deep.equal({ text: 'From must be on or before To.', invalid: 'true', errorColour: true, nextToIt: true });
    expect(await fieldNote('Time zone'), 'the notes of the last report go').to.equal(null);
    expect(await reportStatus.innerText()).to.not.match(/422|INVALID|errors names/);
    expect(await page.evaluate("getComputedStyle(document.getElementById('report-status')).color")).to.equal(ERROR_COLOUR);
    expect(new URL(page.url()).hash).to.equal(shownAs({ from: query.get('from')!, to: query.get('to')!, tz: zone, group_by: 'sid' }));
    expect(await focused(page)).to.equal('From');
    // The two report queries of that page, refused.
    expect(problems).to.deep.equal(Array(2).fill(`${refused('422')} (Unprocessable Entity)`));
    problems.length = 0;
    // Days without a lead: said in words, not an empty table.
    await page.goto(`${origin}/console#/report?from=2020-01-01&to=2020-01-07&tz=UTC&group_by=sid`);
    await page.locator('#report-empty', { hasText: 'No leads in these dates.' }).waitFor();
    expect(await page.locator('#report-table').count()).to.equal(0);

    // An address that names no page, or no lead id: said so, and the address is left as it was.
    await page.goto(`${origin}/console#/nope`);
    await page.getByRole('heading', { name: 'Page not found' }).waitFor();
    expect(await page.getByRole('link', { name: 'Go to the home page' }).getAttribute('href')).to.equal('#/report');
    expect(new URL(page.url()).hash).to.equal('#/nope');
    for (const id of ['99999999999999999999', 'abc']) {
      await page.goto(`${origin}/console#/leads/${id}`);
      await page.locator('#lead-message', { hasText: `Lead ${id} not found` }).waitFor();
      expect(new URL(page.url()).hash).to.equal(`#/leads/${id}`);
    }

    // Deliveries: a click on a row opens its lead; the timeline shows each candidate and its reason.
    await page.getByRole('link', { name: 'Deliveries' }).click();
    const row = page.locator(`#deliveries-table tr[data-lead="${leads.caSold}"]`);
    await row.waitFor();
    // How the lead reaches its buyer, why a delivery failed and when it is tried again are columns; cancelled is a status to filter by.
    expect(await page.locator('#deliveries-table thead th').allInnerTexts()).to.deep.equal(['Lead', 'Buyer or bucket', 'Delivery', 'Status', 'Attempts', 'Last attempt', 'Last answer', 'Next attempt']);
    expect((await row.locator('td').allInnerTexts()).slice(1, 4), 'a pull buyer\'s pending lead').to.deep.equal(['ca-buyer', 'pull', 'Pending']);
    expect(await page.getByLabel('Status').locator('option').evaluateAll((os) => os.map((o) => o.getAttribute('value')))).to.deep.equal(['', 'pending', 'delivered', 'failed', 'cancelled']);
    await shoot(page, 'deliveries', () => row.waitFor());
    await row.locator('td').nth(3).click();
    await page.waitForURL(`**/console#/leads/${leads.caSold}`);
    const timeline = page.locator('#timeline');
    await timeline.waitFor();
    const events = await svc!.request('GET', `/functions/leads/${leads.caSold}/events`, { 'x-api-key': keys.analyst! });
    const items = events.body.items as Array<{ type: string; data: { candidates?: Array<{ buyer: string; eligible: boolean; reason: string }> } }>;
    expect(await timeline.locator(':scope > li').evaluateAll((lis) => lis.map((li) => li.getAttribute('data-type')))).to.deep.equal(items.map((e) => e.type));
    const candidates = items.find((e) => e.type === 'LeadRouted')!.data.candidates!;
    expect(candidates.map((c) => c.buyer)).to.deep.equal(['ca-buyer', 'ny-buyer', 'fl-hook', 'az-refuses', LONG_BUYER]);
    for (const candidate of candidates) {
      const cells = await timeline.locator(`table.candidates tr[data-buyer="${candidate.buyer}"] td`).allInnerTexts();
      expect(cells[2], candidate.buyer).to.equal(candidate.eligible ? 'yes' : 'no');
      // The reason in words, as the service writes it at hand (its tooltip).
      expect(await timeline.locator(`table.candidates tr[data-buyer="${candidate.buyer}"] td [data-code]`).getAttribute('title'), candidate.buyer).to.equal(candidate.reason);
    }
    expect(await timeline.locator('[data-check="phone"]').innerText()).to.match(/^Phone: Passed/);
    expect(await page.locator('#lead-summary').innerText()).to.contain('buyer ca-buyer');
    expect(await page.locator('main').innerText(), 'an analyst sees no consumer field').to.not.contain('Lovelace');
    expect(await page.locator('#lead-consumer').count()).to.equal(0);
    expect(await page.locator('main').innerText(), 'no section left out shows as "null"').to.not.contain('null');
    // Every time in UTC, the zone written: the lead's, and each event's.
    const analystView = (await api(`/functions/leads/${leads.caSold}`, keys.analyst!)).lead as { received_at: string };
    expect(await page.locator('#lead-summary').innerText()).to.contain(`Received\n${utc(analystView.received_at)}`);
    expect(await timeline.locator('.when').allInnerTexts()).to.deep.equal((items as unknown as Array<{ revision: number; occurred_at: string }>).map((e) => `#${e.revision} · ${utc(e.occurred_at)}`));
    await shoot(page, 'lead', () => timeline.waitFor());

    // A lead opened by id from the keyboard: the rejected one shows why.
    await page.getByRole('link', { name: 'Leads', exact: true }).click();
    const idInput = page.getByLabel('Lead id');
    await idInput.fill(String(leads.invalid));
    await idInput.press('Enter');
    await page.locator('#timeline [data-type="LeadRejected"]').waitFor();
    expect(await page.locator('#timeline').innerText()).to.contain('Rejected: Invalid fields INVALID').and.contain('zip');
    expect(await unnamed(page)).to.deep.equal([]);
    // Pages changed, readiness did not: nothing was announced.
    expect(await page.evaluate('window.announced')).to.deep.equal([]);

    // Sign-out forgets the key.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API key').waitFor();
    expect(await page.evaluate('sessionStorage.length')).to.equal(0);
    expect(await page.locator('#nav').isVisible()).to.equal(false);
    expect(await page.getByRole('button', { name: 'Sign out' }).isVisible()).to.equal(false);

    expect(elsewhere, 'requests to other origins').to.deep.equal([]);
    expect(problems).to.deep.equal([]);
    await context.close();
  });

  /** Signs in through the form and waits for the role's first page. */
  async function signIn(page: Page, key: string, first: string): Promise<void> {
    await page.goto(`${origin}/console`);
    const keyInput = page.getByLabel('API key');
    await keyInput.fill(key);
    await keyInput.press('Enter');
    await page.waitForURL(`**/console${first}`);
  }

  const visibleNav = (page: Page) => page.locator('#nav a:visible').allInnerTexts();
  const api = async (path: string, key: string) => {
    const reply = await svc!.request('GET', path, { 'x-api-key': key });
    expect(reply.status, path).to.equal(200);
    return reply.body;
  };
  const settled = async () => svc!.service.projections.waitFor(await svc!.service.store.headPosition());

  it('a supplier sees only its own leads, filters them, and why they were rejected matches the report', async function () {
    // Two rejected leads of its own: one failing on zip, one on zip and e-mail.
    leads.aZip = (await svc!.post(validLead({ zip: 'bad', sid: 'google' }), { 'x-api-key': keys.supA! })).body.lead_id as number;
    leads.aZipEmail = (await svc!.post(validLead({ zip: 'bad', email: 'nope', sid: 'bing' }), { 'x-api-key': keys.supA! })).body.lead_id as number;
    // And two of other codes: posted with a ping whose sid it does not have (PING_MISMATCH), and of
    // a consumer who asked not to be contacted (an admin erased its mobile with suppress: SUPPRESSED).
    const pinged = await svc!.post({ zip: '90210', accident_state: 'CA', sid: 'google' }, { 'x-api-key': keys.supA! }, '/functions/pings');
    expect(pinged.status, pinged.text).to.equal(201);
    const mismatch = await svc!.post(validLead({ ping_id: pinged.body.ping_id, sid: 'yahoo' }), { 'x-api-key': keys.supA! });
    expect(mismatch.body, mismatch.text).to.include({ code: 'PING_MISMATCH' });
    leads.aPingMismatch = mismatch.body.lead_id as number;
    const unwanted = validLead({ sid: 'google' });
    const erasure = await svc!.post({ mobile: unwanted.mobile, suppress: true }, { 'x-api-key': await svc!.key('admin', 'dpo') }, '/functions/erasures');
    expect(erasure.status, erasure.text).to.equal(201);
    const suppressed = await svc!.post(unwanted, { 'x-api-key': keys.supA! });
    expect(suppressed.body, suppressed.text).to.include({ code: 'SUPPRESSED' });
    leads.aSuppressed = suppressed.body.lead_id as number;
    // And a test lead (sold to ca-buyer): listed, marked, and left out of the report.
    leads.aTest = (await svc!.post(validLead({ sid: 'google', test: true }), { 'x-api-key': keys.supA! })).body.lead_id as number;
    await settled();
    const context = await browser!.newContext({ ignoreHTTPSErrors: true, viewport: SIZES.laptop });
    const { page, problems, elsewhere } = await watched(context);
    await signIn(page, keys.supA!, '#/leads');
    expect(await visibleNav(page)).to.deep.equal(['Leads', 'Report', 'Deliveries']);

    // Its leads: exactly what the API lists for its key, never another supplier's.
    const table = page.locator('#leads-table');
    await page.locator('#rejections-by-code[data-totals]').waitFor();
    await table.locator('tbody tr').first().waitFor();
    const shown = async () => (await table.locator('tbody tr').evaluateAll((rows) => rows.map((r) => Number(r.getAttribute('data-lead')))));
    const from = await page.getByLabel('From (UTC)').inputValue();
    const to = await page.getByLabel('To (UTC)').inputValue();
    const until = new Date(Date.parse(`${to}T00:00:00Z`) + 86_400_000).toISOString();
    const listed = await api(`/functions/leads?since=${from}T00:00:00Z&until=${until}`, keys.supA!);
    const own = (listed.items as Array<{ lead_id: number }>).map((r) => r.lead_id);
    expect(own).to.have.members([leads.caSold, leads.caSold2, leads.nySold, leads.aZip, leads.aZipEmail, leads.aPingMismatch, leads.aSuppressed, leads.aTest]);
    expect(await shown()).to.deep.equal(own);
    // Each row's time in UTC, the zone written; its money headed with its currency.
    expect(await table.locator('tbody tr td:nth-child(2)').allInnerTexts()).to.deep.equal((listed.items as Array<{ received_at: string }>).map((r) => utc(r.received_at)));
    expect(await table.locator('thead th').nth(6).innerText()).to.equal('Revenue (USD)');
    // The test lead says it is one, in words, and the page says what leaves test leads out.
    expect(await table.locator('.badge').evaluateAll((badges) => badges.map((b) => [b.closest('tr')!.getAttribute('data-lead'), b.textContent]))).to.deep.equal([[String(leads.aTest), 'test']]);
    expect(await table.locator(`tr[data-lead="${leads.aTest}"] td`).first().innerText()).to.equal(`${leads.aTest} test`);
    expect(await page.locator('#leads-message').innerText()).to.contain('1 of them is a test lead, marked "test": the report and the breakdowns above leave test leads out.');
    expect(await shown()).to.not.include(leads.txUnsold).and.not.include(leads.invalid);

    // By code: the report's counts for the same days; by field: the rejected leads in the table.
    const report = await api(`/functions/reports/summary?from=${from}&to=${to}&tz=UTC&group_by=day&limit=500`, keys.supA!);
    const rows = report.items as Array<Record<string, number>>;
    const columns = Object.keys(rows[0]!).filter((f) => f === 'rejected' || f.startsWith('rejected_'));
    expect(columns).to.have.length(8);
    const fromReport = Object.fromEntries(columns.map((f) => [f, rows.reduce((s, r) => s + (r[f] ?? 0), 0)]));
    expect(fromReport).to.include({ rejected: 4, rejected_INVALID: 2, rejected_PING_MISMATCH: 1, rejected_SUPPRESSED: 1 });
    expect(JSON.parse((await page.locator('#rejections-by-code').getAttribute('data-totals'))!)).to.deep.equal(fromReport);
    // A row per code with any, adding up to the total the page states.
    const byCode = await page.locator('#rejections-by-code tbody tr').evaluateAll((trs) => trs.map((tr) => [tr.getAttribute('data-code'), Number(tr.querySelector('td')!.textContent)]));
    expect(Object.fromEntries(byCode)).to.deep.equal({ INVALID: 2, SUPPRESSED: 1, PING_MISMATCH: 1 });
    expect(await page.locator('#rejections-by-code tfoot td').innerText()).to.equal('4');
    expect(await page.locator('#rejections-by-code p').innerText()).to.contain('4 in all').and.contain('Over the dates, all sources and statuses; test leads left out.');
    expect(await page.locator('#rejections-by-field p').innerText()).to.contain('test leads left out');
    expect(byCode.reduce((s, [, n]) => s + (n as number), 0)).to.equal(fromReport.rejected);
    expect(await page.locator('#rejections-by-field tr[data-field="zip"] td').innerText()).to.equal('2');
    expect(await page.locator('#rejections-by-field tr[data-field="email"] td').innerText()).to.equal('1');
    expect(await page.locator('#rejections-by-field tr[data-field="sid"] td').innerText()).to.equal('1');
    expect(await page.locator('#rejections-by-field tr[data-field="mobile"] td').innerText()).to.equal('1');
    expect(await page.locator('#rejections-by-field').innerText()).to.contain('rejected leads shown');
    expect(await unnamed(page)).to.deep.equal([]);
    await shoot(page, 'supplier-leads', () => table.locator('tbody tr').first().waitFor());

    // The code filter offers every code, and the list takes each: a rejection of each new kind.
    const codeFilter = page.getByLabel('Code', { exact: true });
    expect(await codeFilter.locator('option').evaluateAll((os) => os.map((o) => o.getAttribute('value')))).to.deep.equal(
      ['', 'SOLD', 'UNSOLD', ...columns.filter((f) => f !== 'rejected').map((f) => f.slice('rejected_'.length))],
    );
    for (const [code, lead] of [['PING_MISMATCH', leads.aPingMismatch], ['SUPPRESSED', leads.aSuppressed]] as const) {
      await codeFilter.selectOption(code);
      await page.getByRole('button', { name: 'Show' }).click();
      await table.locator(`tr[data-lead="${lead}"]`).waitFor();
      await page.locator('main [role="status"]', { hasText: /^1 lead shown/ }).waitFor();
      expect(await shown(), code).to.deep.equal([lead]);
      expect(await table.locator('tbody tr td').nth(3).locator('[data-code]').getAttribute('title')).to.equal(code);
    }
    await codeFilter.selectOption('');

    // Filtered to its rejected leads from one source.
    await page.getByLabel('Status').selectOption('rejected');
    await page.getByLabel('Source (sid)').fill('bing');
    await page.getByRole('button', { name: 'Show' }).click();
    await page.locator('main [role="status"]', { hasText: /^1 lead shown/ }).waitFor();
    expect(await shown()).to.deep.equal([leads.aZipEmail]);
    expect(await page.locator('#rejections-by-field tr[data-field="zip"] td').innerText()).to.equal('1');

    // A row opens its lead; another supplier's lead, opened by its id, is not found.
    await table.locator(`tr[data-lead="${leads.aZipEmail}"] td`).nth(2).click();
    await page.waitForURL(`**/console#/leads/${leads.aZipEmail}`);
    await page.locator('#timeline [data-type="LeadRejected"]').waitFor();
    await page.goto(`${origin}/console#/leads/${leads.invalid}`);
    await page.locator('#lead-message', { hasText: 'not found' }).waitFor();
    expect(await page.locator('#lead-message').innerText()).to.contain(`Lead ${leads.invalid} not found`);
    expect(await page.locator('#timeline').count()).to.equal(0);
    await shoot(page, 'supplier-lead-not-found', () => page.locator('#lead-message', { hasText: 'not found' }).waitFor());

    expect(elsewhere).to.deep.equal([]);
    // Chromium logs the two refused reads of the other supplier's lead (lead and events); nothing else.
    expect(problems).to.deep.equal(Array(2).fill('console: Failed to load resource: the server responded with a status of 404 (Not Found)'));
    await context.close();
  });

  it('a pull buyer acknowledges a pending pull and returns a bought lead with one of its reasons', async function () {
    const context = await browser!.newContext({ ignoreHTTPSErrors: true, viewport: SIZES.laptop });
    const { page, problems, elsewhere } = await watched(context);
    await signIn(page, keys.caBuyer!, '#/bought');
    // Its home page first.
    expect(await visibleNav(page)).to.deep.equal(['Bought', 'Pulls', 'Deliveries']);

    // Bought: the leads the API lists for its key, the test lead marked and never delivered.
    const bought = page.locator('#bought-table');
    await bought.locator('tbody tr').first().waitFor();
    const boughtRows = (await api('/functions/leads', keys.caBuyer!)).items as Array<{ lead_id: number; received_at: string }>;
    const boughtIds = boughtRows.map((r) => r.lead_id);
    expect(boughtIds).to.deep.equal([leads.aTest, leads.caSold2, leads.caSold]);
    expect(await bought.locator('tbody tr').evaluateAll((rows) => rows.map((r) => Number(r.getAttribute('data-lead'))))).to.deep.equal(boughtIds);
    expect(await bought.locator('tbody tr td:nth-child(2)').allInnerTexts()).to.deep.equal(boughtRows.map((r) => utc(r.received_at)));
    expect(await bought.locator('thead th').allInnerTexts()).to.deep.equal(['Lead', 'Received', 'Name', 'State', 'Price (USD)', 'Delivery', 'Feedback']);
    expect(await bought.locator(`tr[data-lead="${leads.aTest}"] td`).allInnerTexts()).to.include(`${leads.aTest} test`).and.include('none (test lead)');
    expect(await page.locator('#bought-message').innerText()).to.contain('1 of them is a test lead, marked "test"');
    // At a phone's width each lead is a card: its time under the word Received, shown to the eye
    // only (a screen reader hears the column's own heading).
    await page.setViewportSize(SIZES.phone);
    expect(await bought.locator('tbody tr td:nth-child(2)').first().evaluate((td) => [td.dataset.label, td.ownerDocument.defaultView!.getComputedStyle(td, '::before').display])).to.deep.equal(['Received', 'block']);
    await page.setViewportSize(SIZES.laptop);
    await shoot(page, 'buyer-bought', () => bought.locator('tbody tr').first().waitFor());

    // Pulls: acknowledging one takes it off the list, and the API shows it delivered.
    await page.getByRole('link', { name: 'Pulls' }).click();
    const pull = page.locator(`#pulls-table tr[data-lead="${leads.caSold}"]`);
    await pull.waitFor();
    expect(await page.locator(`#pulls-table tr[data-lead="${leads.caSold2}"]`).count()).to.equal(1);
    expect(await unnamed(page)).to.deep.equal([]);
    const pendingRows = (await api('/functions/deliveries?status=pending', keys.caBuyer!)).items as Array<{ created_at: string }>;
    expect(await page.locator('#pulls-table tbody tr td:nth-child(2)').allInnerTexts()).to.deep.equal(pendingRows.map((r) => utc(r.created_at)));
    // At a phone's width each pull is a card, its Acknowledge button inside it, as wide as the card's content.
    await page.setViewportSize(SIZES.phone);
    expect(await pull.evaluate((tr) => {
      const card = tr.getBoundingClientRect();
      const button = tr.querySelector('td.action')!.getBoundingClientRect();
      return [button.left - card.left, card.right - button.right, button.top > card.top && button.bottom < card.bottom];
    })).to.deep.equal([12, 12, true]);
    await page.setViewportSize(SIZES.laptop);
    await shoot(page, 'buyer-pulls', () => pull.waitFor());
    // By keyboard: Tab to the button, Enter; the focus moves on to the pull still waiting.
    expect(await tabTo(page, `Acknowledge lead ${leads.caSold}`)).to.deep.equal([String(leads.caSold2), `Acknowledge lead ${leads.caSold2}`, String(leads.caSold), `Acknowledge lead ${leads.caSold}`]);
    await page.keyboard.press('Enter');
    await pull.waitFor({ state: 'detached' });
    expect(await focused(page)).to.equal(`Acknowledge lead ${leads.caSold2}`);
    expect(await page.locator('main [role="status"]').innerText()).to.contain(`Lead ${leads.caSold} acknowledged`).and.contain('1 pending pull shown.');
    await settled();
    const pending = ((await api('/functions/deliveries?status=pending', keys.caBuyer!)).items as Array<{ lead_id: number }>).map((r) => r.lead_id);
    expect(pending).to.deep.equal([leads.caSold2]);
    const delivered = (await api('/functions/deliveries?status=delivered', keys.caBuyer!)).items as Array<{ lead_id: number; status: string }>;
    expect(delivered.map((r) => r.lead_id)).to.deep.equal([leads.caSold]);

    // A return with one of its own reasons; the report then counts it; the form is then done.
    await page.goto(`${origin}/console#/leads/${leads.caSold}`);
    const reason = page.getByLabel('Reason');
    await reason.waitFor();
    expect(await reason.locator('option').evaluateAll((os) => os.map((o) => o.getAttribute('value')))).to.deep.equal(['', 'bad_phone', 'fraud']);
    await shoot(page, 'buyer-lead-return', () => reason.waitFor());
    // The return form by keyboard: Tab to the reason, the arrow keys to choose, Tab, Enter.
    expect(await tabTo(page, 'Reason')).to.deep.equal(['Lead id', 'Open', 'Reason']);
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('ArrowDown');
    expect(await reason.inputValue()).to.equal('fraud');
    expect(await tabTo(page, 'Return')).to.deep.equal(['Return']);
    await page.keyboard.press('Enter');
    const answer = page.locator('#return-answer');
    await page.locator('#return-answer', { hasText: /^Returned \(fraud\)/ }).waitFor();
    await settled();
    const query = `from=${new Date(Date.now() - 86_400_000).toISOString().slice(0, 10)}&to=${new Date(Date.now() + 86_400_000).toISOString().slice(0, 10)}&group_by=buyer`;
    const byBuyer = (await api(`/functions/reports/summary?${query}`, keys.analyst!)).items as Array<Record<string, unknown>>;
    expect(byBuyer.find((r) => r.buyer === 'ca-buyer')).to.include({ sold: 2, returned: 1 });
    // Returned once and for all: the form offers no second Return, which could only be refused.
    expect(await page.getByRole('button', { name: 'Return', exact: true }).isDisabled()).to.equal(true);
    expect(await answer.getAttribute('class')).to.equal('wide ok');
    // Opened again, the lead offers no form that could only be refused: it says when and why it was returned.
    await page.reload();
    await page.locator('#returned-note').waitFor();
    expect(await page.locator('#returned-note').innerText()).to.match(/You returned this lead on \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(fraud\)/);
    expect(await page.locator('#return-form').count()).to.equal(0);

    // A test lead: no return form, and the page says why.
    await page.goto(`${origin}/console#/leads/${leads.aTest}`);
    await page.locator('#test-lead-note').waitFor();
    expect(await page.locator('#test-lead-note').innerText()).to.contain('This is a test lead: it cannot be returned and takes no feedback.');
    expect(await page.locator('#return-form').count()).to.equal(0);
    expect(await page.locator('#lead-summary').innerText()).to.contain('none: test leads are not delivered');

    // A lead it did not buy is not found for it.
    await page.goto(`${origin}/console#/leads/${leads.nySold}`);
    await page.locator('#lead-message', { hasText: 'not found' }).waitFor();

    expect(elsewhere).to.deep.equal([]);
    expect(problems).to.deep.equal([
      'console: Failed to load resource: the server responded with a status of 404 (Not Found)',
      'console: Failed to load resource: the server responded with a status of 404 (Not Found)',
    ]);
    await context.close();
  });

  it('an admin, by keyboard alone: the report, projection lag, every delivery, and a lead with its personal data', async function () {
    keys.admin = await svc!.key('admin', 'ops-admin');
    await settled();
    const context = await browser!.newContext({ ignoreHTTPSErrors: true, viewport: SIZES.laptop });
    const { page, problems, elsewhere } = await watched(context);
    await page.goto(`${origin}/console`);
    // The key field has the focus on arrival: type, Enter.
    await page.getByLabel('API key').waitFor();
    expect(await focused(page)).to.equal('API key');
    await page.keyboard.type(keys.admin!);
    await page.keyboard.press('Enter');
    await page.waitForURL('**/console#/report');
    expect(await visibleNav(page)).to.deep.equal(['Report', 'Leads', 'Deliveries', 'Personal data']);
    expect(await page.locator('#who').innerText()).to.equal('ops-admin (admin)');
    const daily = page.locator('#chart-daily[data-totals]');
    await daily.waitFor();

    // The report's form, by Tab: the page's controls in order, the grouping changed with the arrow
    // keys, submitted with Enter; the table then holds the API's rows for that grouping.
    expect(await focused(page), 'a new page starts the keyboard at its content').to.equal('main');
    expect(await tabTo(page, 'Group by')).to.deep.equal(['From', 'To', 'Time zone', 'Group by']);
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('ArrowDown');
    expect(await page.getByLabel('Group by').inputValue()).to.equal('state');
    expect(await tabTo(page, 'Show')).to.deep.equal(['Then by', 'Columns', 'Show']);
    await page.keyboard.press('Enter');
    await page.locator('#chart-groups').locator('xpath=..').getByRole('heading', { name: 'By state' }).waitFor();
    expect(new URL(page.url()).hash, 'the address names the report shown').to.match(/^#\/report\?from=\d{4}-\d\d-\d\d&to=\d{4}-\d\d-\d\d&tz=[^&]+&group_by=state$/);
    const query = new URLSearchParams({
      from: await page.getByLabel('From', { exact: true }).inputValue(),
      to: await page.getByLabel('To', { exact: true }).inputValue(),
      tz: await page.getByLabel('Time zone', { exact: true }).inputValue(),
    });
    const byState = (await api(`/functions/reports/summary?${query}&group_by=state&limit=500`, keys.admin!)).items as Array<Record<string, unknown>>;
    expect(await page.locator('#report-table tbody tr td:first-child').allInnerTexts()).to.deep.equal(byState.map((r) => String(r.state ?? '(none)')));
    expect(JSON.parse((await page.locator('#chart-groups').getAttribute('data-totals'))!)).to.deep.equal(sum(byState, ['received', 'sold']));
    const byDay = sum((await api(`/functions/reports/summary?${query}&group_by=day&limit=500`, keys.admin!)).items as Array<Record<string, unknown>>, ['received', 'accepted', 'sold', 'revenue']);
    expect(JSON.parse((await daily.getAttribute('data-totals'))!)).to.deep.equal(byDay);

    // Readiness and projection lag, as /readyz has them.
    const readyz = await svc!.request('GET', '/readyz');
    expect(readyz.status).to.equal(200);
    const readiness = page.locator('#readiness[data-ready="true"]');
    await readiness.waitFor();
    expect(await readiness.innerText()).to.match(/^Ready · projection lag \d+\.\d s, \d+ events behind$/);
    expect(await unnamed(page)).to.deep.equal([]);
    await shoot(page, 'admin-report', () => daily.waitFor());

    // The skip link takes the keyboard to the content without leaving the page (the report keeps its grouping).
    await page.getByRole('link', { name: 'Skip to content' }).focus();
    await page.keyboard.press('Enter');
    expect(await focused(page)).to.equal('main');
    expect(new URL(page.url()).hash).to.match(/^#\/report\?.*group_by=state$/);
    expect(await page.getByLabel('Group by').inputValue()).to.equal('state');
    expect(await tabTo(page, 'From')).to.deep.equal(['From']);

    // Every delivery, the API's list; Enter on a nav link, then Tab to a row's lead and Enter.
    await page.getByRole('link', { name: 'Deliveries' }).press('Enter');
    await page.waitForURL('**/console#/deliveries');
    const rows = page.locator('#deliveries-table tbody tr');
    await rows.first().waitFor();
    const deliveries = ((await api('/functions/deliveries', keys.admin!)).items as Array<{ lead_id: number }>).map((r) => r.lead_id);
    expect(deliveries).to.include.members([leads.caSold, leads.caSold2, leads.nySold]);
    expect(await rows.evaluateAll((trs) => trs.map((tr) => Number(tr.getAttribute('data-lead'))))).to.deep.equal(deliveries);
    expect(await unnamed(page)).to.deep.equal([]);
    await shoot(page, 'admin-deliveries', () => rows.first().waitFor());
    expect((await tabTo(page, String(leads.nySold))).slice(0, 2)).to.deep.equal(['Status', 'Show']);
    await page.keyboard.press('Enter');
    await page.waitForURL(`**/console#/leads/${leads.nySold}`);

    // A lead's page: an admin sees the consumer, in its own card and in the timeline, as the API gives them.
    const consumer = page.locator('#lead-consumer');
    await consumer.waitFor();
    const lead = ((await api(`/functions/leads/${leads.nySold}`, keys.admin!)).lead as { lead: Record<string, string> }).lead;
    expect(lead.email).to.match(/@example\.com$/);
    const card = await consumer.innerText();
    expect(card).to.contain('Ada Lovelace').and.contain(lead.email).and.contain(lead.mobile).and.contain('10001');
    expect(await page.locator('#timeline [data-type="LeadReceived"]').innerText()).to.contain(`Consumer: Ada Lovelace, ${lead.email}`);
    expect(await page.locator('#timeline table.candidates tr[data-buyer="ny-buyer"] td').nth(2).innerText()).to.equal('yes');
    expect(await page.locator('main').innerText()).to.not.contain('null');
    expect(await unnamed(page)).to.deep.equal([]);
    await shoot(page, 'admin-lead', () => consumer.waitFor());

    // Leads: every supplier's; the filter form by Tab, a source typed, Enter.
    await page.getByRole('link', { name: 'Leads', exact: true }).press('Enter');
    await page.waitForURL('**/console#/leads');
    await page.locator('#leads-table tbody tr').first().waitFor();
    expect(await tabTo(page, 'Source (sid)')).to.deep.equal(['From (UTC)', 'To (UTC)', 'Status', 'Code', 'Source (sid)']);
    await page.keyboard.type('meta');
    await page.keyboard.press('Enter');
    await page.locator('main [role="status"]', { hasText: /^2 leads shown/ }).waitFor();
    const shown = await page.locator('#leads-table tbody tr').evaluateAll((trs) => trs.map((tr) => Number(tr.getAttribute('data-lead'))));
    expect(shown).to.have.members([leads.txUnsold, leads.invalid]);
    expect(await unnamed(page)).to.deep.equal([]);

    // Sign-out by keyboard; the key field has the focus again.
    await page.getByRole('button', { name: 'Sign out' }).press('Enter');
    await page.getByLabel('API key').waitFor();
    expect(await focused(page)).to.equal('API key');
    expect(await page.evaluate('sessionStorage.length')).to.equal(0);

    expect(elsewhere).to.deep.equal([]);
    expect(problems).to.deep.equal([]);
    await context.close();
  });

  it("the console's files: gzipped for a client that takes it, as they are for one that does not, each with its own ETag", async function () {
    const file = readFileSync(join(dirname(createRequire(import.meta.url).resolve('chart.js')), 'chart.umd.js'), 'utf8');
    const plain = await svc!.request('GET', '/console/chart.umd.js');
    expect(plain.status).to.equal(200);
    expect(plain.headers['content-encoding']).to.equal(undefined);
    expect(plain.headers.vary).to.contain('Accept-Encoding');
    expect(plain.text).to.equal(file);
    const zipped = await svc!.request('GET', '/console/chart.umd.js', { 'accept-encoding': 'gzip, deflate, br' });
    expect(zipped.status).to.equal(200);
    expect(zipped.headers['content-encoding']).to.equal('gzip');
    expect(zipped.headers['content-type']).to.equal('text/javascript; charset=utf-8');
    expect(zipped.headers['content-security-policy']).to.contain("script-src 'self'");
    expect(Number(zipped.headers['content-length'])).to.be.greaterThan(0).and.lessThan(file.length / 2);
    expect(zipped.headers.etag).to.not.equal(plain.headers.etag);
    // Each representation is revalidated by its own ETag; the other's gets the file again.
    expect((await svc!.request('GET', '/console/chart.umd.js', { 'accept-encoding': 'gzip', 'if-none-match': String(zipped.headers.etag) })).status).to.equal(304);
    expect((await svc!.request('GET', '/console/chart.umd.js', { 'if-none-match': String(plain.headers.etag) })).status).to.equal(304);
    expect((await svc!.request('GET', '/console/chart.umd.js', { 'if-none-match': String(zipped.headers.etag) })).status).to.equal(200);
    expect((await svc!.request('GET', '/console/nope.js', { 'accept-encoding': 'gzip' })).status).to.equal(404);
    // The page asks for every module up front (app.js's imports would otherwise wait for app.js).
    const page = (await svc!.request('GET', '/console')).text;
    const preloaded = [...page.matchAll(/<link rel="modulepreload" href="\/console\/([a-z-]+\.js)">/g)].map((m) => m[1]);
    expect(preloaded).to.have.members(readdirSync('console').filter((name) => name.endsWith('.js') && name !== 'app.js'));
  });

  it('first load: page weight and time to the first chart, measured in this test service', async function () {
    const context = await browser!.newContext({ ignoreHTTPSErrors: true, viewport: SIZES.laptop });
    const { page, problems, elsewhere } = await watched(context);
    await page.addInitScript(`sessionStorage.setItem('leadpost.apiKey', ${JSON.stringify(keys.analyst)})`);
    // A 30-day report by state, named by its address (as the console bench opens it).
    const to = new Date().toISOString().slice(0, 10);
    const from = new Date(Date.now() - 29 * 86_400_000).toISOString().slice(0, 10);
    await page.goto(`${origin}/console#/report?from=${from}&to=${to}&tz=UTC&group_by=state`);
    await page.locator('#chart-daily[data-totals]').waitFor();
    expect(await page.getByLabel('From', { exact: true }).inputValue()).to.equal(from);
    expect(await page.getByLabel('To', { exact: true }).inputValue()).to.equal(to);
    expect(await page.getByLabel('Time zone').inputValue()).to.equal('UTC');
    expect(await page.getByLabel('Group by').inputValue()).to.equal('state');
    expect(await page.locator('#report-table tbody tr').count()).to.equal(3);
    // Run in the page (this project's TypeScript has no DOM types, so it is passed as text).
    const measured = (await page.evaluate(`(() => {
      const navigation = performance.getEntriesByType('navigation')[0];
      const assets = performance.getEntriesByType('resource').filter((r) => new URL(r.name).pathname.startsWith('/console/'));
      return {
        bytes: navigation.transferSize + assets.reduce((s, r) => s + r.transferSize, 0),
        files: assets.length + 1,
        firstChartMs: Math.round(performance.getEntriesByName('leadpost:first-chart')[0].startTime),
      };
    })()`)) as { bytes: number; files: number; firstChartMs: number };
    writeFileSync(join(SHOTS, 'first-load.json'), `${JSON.stringify(measured, null, 2)}\n`);
    console.log(`      first load of /console: ${measured.files} files, ${measured.bytes} bytes; first chart after ${measured.firstChartMs} ms`);
    // Gzipped: Chart.js alone is 210 KB as a file.
    expect(measured.bytes).to.be.greaterThan(60_000).and.lessThan(130_000);
    expect(elsewhere).to.deep.equal([]);
    expect(problems).to.deep.equal([]);
    await context.close();
  });

  it('an admin finds a consumer, erases it with suppress after confirming, and its leads then show erased; no other role sees the page', async function () {
    keys.admin = await svc!.key('admin', 'root');
    keys.supC = await svc!.key('supplier', 'sup-c');
    // A consumer with two leads (the same e-mail, two mobiles: sold, then a duplicate), from a supplier.
    const run = Date.now() % 100_000;
    const consumer = { email: `erase.me.${run}@example.com`, mobile: testMobile(5_000_000 + run), mobile2: testMobile(5_100_000 + run) };
    const posted: number[] = [];
    for (const [mobile, sid, status] of [[consumer.mobile, 'erase-1', 201], [consumer.mobile2, 'erase-2', 409]] as const) {
      const reply = await svc!.post(leadWith(consumer.email, mobile, { first_name: 'Grace', last_name: 'Hopperfield', sid }), { 'x-api-key': keys.supC! });
      expect(reply.status, reply.text).to.equal(status);
      posted.push(reply.body.lead_id as number);
    }
    await settled();
    const personal = [consumer.email, consumer.mobile, consumer.mobile.slice(2), consumer.mobile2, 'Hopperfield'];
    const context = await browser!.newContext({ ignoreHTTPSErrors: true, viewport: SIZES.laptop });
    const { page, problems, elsewhere } = await watched(context);
    // Every request the page makes: a consumer's contacts go in a body, never in a URL (proxies and
    // access logs in front of the service record URLs).
    const sent: Array<{ method: string; url: string; body: string | null }> = [];
    page.on('request', (req) => sent.push({ method: req.method(), url: decodeURIComponent(req.url()), body: req.postData() }));
    /** Nothing the admin typed about the consumer is in the address bar or the tab's storage. */
    const keptOutOfTheBrowser = async () => {
      const url = decodeURIComponent(page.url());
      for (const value of personal) expect(url, 'address bar').to.not.contain(value);
      expect(await page.evaluate('localStorage.length')).to.equal(0);
      expect(await page.evaluate('JSON.stringify(Object.entries(sessionStorage))')).to.equal(JSON.stringify([['leadpost.apiKey', keys.admin]]));
    };

    await signIn(page, keys.admin!, '#/report');
    expect(await visibleNav(page)).to.deep.equal(['Report', 'Leads', 'Deliveries', 'Personal data']);
    await page.getByRole('link', { name: 'Personal data' }).click();
    await page.waitForURL('**/console#/personal-data');
    const find = page.locator('form[aria-labelledby="find-title"]');
    const erase = page.locator('form[aria-labelledby="erase-title"]');
    expect(await unnamed(page)).to.deep.equal([]);
    // Wide enough for a usual address to be read whole.
    expect(await erase.getByLabel('E-mail').evaluate((input) => input.getBoundingClientRect().width)).to.be.greaterThan(250);

    // Find (an access request): the leads the API lists for that consumer, with its personal data.
    await find.getByLabel('E-mail').fill(consumer.email);
    await find.getByLabel('E-mail').press('Enter');
    const found = page.locator('#consumer-leads tbody tr');
    await page.locator('#consumer-message', { hasText: '2 lead(s) of this consumer.' }).waitFor();
    const lookups = sent.filter((r) => r.url.startsWith(`${origin}/functions/consumers`));
    expect(lookups.map((r) => [r.method, r.url, r.body])).to.deep.equal([['POST', `${origin}/functions/consumers/lookup`, JSON.stringify({ email: consumer.email })]]);
    const access = (await svc!.post({ email: consumer.email }, { 'x-api-key': keys.admin! }, '/functions/consumers/lookup')).body;
    const ids = (access.items as Array<{ lead_id: number }>).map((r) => r.lead_id);
    expect(ids).to.deep.equal(posted);
    expect(await found.evaluateAll((rows) => rows.map((r) => Number(r.getAttribute('data-lead'))))).to.deep.equal(ids);
    const firstRow = await found.first().locator('td').allInnerTexts();
    expect(firstRow).to.include('Grace Hopperfield').and.include(consumer.email).and.include(consumer.mobile).and.include('held');
    expect(await found.first().locator('a').getAttribute('href')).to.equal(`#/leads/${ids[0]}`);
    await keptOutOfTheBrowser();
    await shoot(page, 'personal-data-found', () => found.first().waitFor());

    // Refusals in words: bad contacts name both fields (422); a key that is not an admin's is
    // refused by the service (403), whatever the page shows.
    await erase.getByRole('button', { name: 'Erase…' }).click();
    await page.locator('#erase-answer', { hasText: "Type the consumer's e-mail and/or mobile first." }).waitFor();
    expect(await page.locator('#erase-confirm').isVisible(), 'nothing to confirm').to.equal(false);
    await erase.getByLabel('E-mail').fill('not-an-address');
    await erase.getByLabel('Mobile').fill('12');
    await erase.getByRole('button', { name: 'Erase…' }).click();
    await page.getByRole('button', { name: 'Erase for good' }).click();
    const erased = page.locator('#erase-answer');
    await erased.locator('.error').waitFor();
    expect(await erased.innerText()).to.match(/^Please check: E-mail .+; Mobile .+\.$/);
    expect(await erase.locator('[aria-invalid="true"]').evaluateAll((inputs) => inputs.map((i) => i.getAttribute('name')))).to.deep.equal(['email', 'mobile']);
    await page.evaluate(`sessionStorage.setItem('leadpost.apiKey', ${JSON.stringify(keys.analyst)})`);
    await find.getByRole('button', { name: 'Find' }).click();
    await page.locator('#consumer-message', { hasText: 'only an admin key' }).waitFor();
    await page.evaluate(`sessionStorage.setItem('leadpost.apiKey', ${JSON.stringify(keys.admin)})`);

    // Erase, by keyboard: the contacts, suppress, then an explicit confirmation.
    await erase.getByLabel('E-mail').fill(consumer.email);
    await erase.getByLabel('Mobile').fill(consumer.mobile);
    await erase.getByLabel('Suppress later leads').focus();
    await page.keyboard.press('Space');
    await erase.getByRole('button', { name: 'Erase…' }).press('Enter');
    const confirmation = page.locator('#erase-confirm');
    await confirmation.waitFor();
    expect(await confirmation.innerText()).to.contain('cannot be undone').and.contain(consumer.email);
    expect(await page.evaluate('document.activeElement.textContent')).to.equal('Cancel');
    await shoot(page, 'personal-data-confirm', () => confirmation.waitFor());
    await page.keyboard.press('Shift+Tab');
    expect(await page.evaluate('document.activeElement.textContent')).to.equal('Erase for good');
    await page.keyboard.press('Enter');
    const record = erased.locator('[data-erasure]');
    await record.waitFor();
    // The button pressed went with the confirmation: the keyboard is at the result, not lost to the page.
    expect(await focused(page)).to.equal('Consumer erased');
    const erasureId = (await record.getAttribute('data-erasure'))!;
    const asRecorded = (await api(`/functions/erasures/${erasureId}`, keys.admin!)).erasure as { leads_erased: number; lead_ids: number[]; suppressed: boolean };
    expect(asRecorded).to.include({ leads_erased: 2, suppressed: true });
    expect(asRecorded.lead_ids).to.have.members(ids);
    const shown = await record.innerText();
    expect(shown).to.contain(erasureId).and.match(/Leads erased\s+2/).and.match(/Later leads suppressed\s+yes/).and.contain('completed');
    expect(shown).to.match(/First erased\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\n/);
    for (const id of ids) expect(shown).to.contain(String(id));
    // The contacts are forgotten: both forms are empty and the consumer's leads are gone.
    for (const form of [find, erase]) for (const label of ['E-mail', 'Mobile']) expect(await form.getByLabel(label).inputValue(), label).to.equal('');
    expect(await erase.getByLabel('Suppress later leads').isChecked()).to.equal(false);
    expect(await found.count()).to.equal(0);
    const text = await page.locator('main').innerText();
    for (const value of personal) expect(text).to.not.contain(value);
    // Nor in what the page holds hidden (innerText leaves hidden nodes out).
    const held = await page.locator('main').evaluate((main) => main.textContent ?? '');
    for (const value of personal) expect(held).to.not.contain(value);
    await keptOutOfTheBrowser();
    await shoot(page, 'personal-data-erased', () => record.waitFor());

    // The list of erasures has it first, as recorded, naming no contact.
    const listed = page.locator(`#erasures-table tr[data-erasure="${erasureId}"]`);
    await listed.waitFor();
    expect(await page.locator('#erasures-table tbody tr').first().getAttribute('data-erasure')).to.equal(erasureId);
    const row = await listed.innerText();
    expect(row).to.match(/admin:\S+/).and.contain('e-mail').and.match(/\b2\b/).and.contain('yes');
    expect(await page.locator('#erasures-table').evaluate((table) => table.textContent ?? '')).to.not.contain(consumer.email);

    // The record links to its own address, where it is looked up by id.
    await record.getByRole('link', { name: erasureId }).click();
    await page.waitForURL(`**/console#/personal-data/erasures/${erasureId}`);
    await page.locator(`#erasure-found [data-erasure="${erasureId}"]`).waitFor();
    expect(await page.getByLabel('Erasure id').inputValue()).to.equal(erasureId);

    // A lead of the consumer now shows erased and no personal field, for the admin too.
    await page.locator('#erasure-found').getByRole('link', { name: String(ids[0]), exact: true }).click();
    await page.waitForURL(`**/console#/leads/${ids[0]}`);
    await page.locator('#timeline [data-type="LeadPersonalDataErased"]').waitFor();
    expect(await page.locator('#lead-summary').innerText()).to.match(/Personal data\s+erased/);
    // Its consumer card says so, rather than a card of blanks.
    const card = await page.locator('#lead-consumer').innerText();
    expect(card).to.contain('Personal data erased').and.not.contain('E-mail').and.not.contain('—');
    const leadPage = await page.locator('main').innerText();
    for (const value of personal) expect(leadPage).to.not.contain(value);
    await keptOutOfTheBrowser();
    // In the list of leads, its rows are marked erased.
    await page.getByRole('link', { name: 'Leads', exact: true }).click();
    await page.locator(`#leads-table tr[data-lead="${ids[0]}"]`).waitFor();
    for (const id of ids) expect(await page.locator(`#leads-table tr[data-lead="${id}"] .badge`).allInnerTexts(), String(id)).to.deep.equal(['erased']);

    // A later lead of the consumer is refused, as suppressed.
    const later = await svc!.post(leadWith(consumer.email, testMobile(5_200_000 + run)), { 'x-api-key': keys.supC! });
    expect(later.status, later.text).to.equal(422);
    expect(later.body.code).to.equal('SUPPRESSED');

    expect(elsewhere).to.deep.equal([]);
    for (const { url } of sent) for (const value of personal) expect(url, 'a URL the page requested').to.not.contain(value);
    // Chromium logs the two refused requests the test asked for; nothing else.
    expect(problems).to.deep.equal([
      'console: Failed to load resource: the server responded with a status of 422 (Unprocessable Entity)',
      'console: Failed to load resource: the server responded with a status of 403 (Forbidden)',
    ]);
    await context.close();

    // An analyst has no such page: not in its nav; by its address, a page that says whom it is
    // for and who is signed in, with the way home (not the analyst's home page without a word); the API refuses it.
    const other = await browser!.newContext({ ignoreHTTPSErrors: true, viewport: SIZES.laptop });
    const watchedOther = await watched(other);
    await signIn(watchedOther.page, keys.analyst!, '#/report');
    expect(await visibleNav(watchedOther.page)).to.not.include('Personal data');
    await watchedOther.page.goto(`${origin}/console#/personal-data/erasures/${erasureId}`);
    await watchedOther.page.getByRole('heading', { name: 'Not a page for this key' }).waitFor();
    expect(await watchedOther.page.locator('#not-for-this-key').innerText()).to.equal('Personal data is for admin keys; you are signed in as ann (analyst).');
    expect(await watchedOther.page.getByRole('link', { name: 'Go to the home page' }).getAttribute('href')).to.equal('#/report');
    expect(new URL(watchedOther.page.url()).hash).to.equal(`#/personal-data/erasures/${erasureId}`);
    expect(await watchedOther.page.locator('#consumer-leads, #erasure-found').count()).to.equal(0);
    for (const key of [keys.analyst!, keys.supC!]) {
      expect((await svc!.request('GET', `/functions/consumers?email=${encodeURIComponent(consumer.email)}`, { 'x-api-key': key })).status).to.equal(403);
      expect((await svc!.post({ email: consumer.email }, { 'x-api-key': key }, '/functions/erasures')).status).to.equal(403);
      expect((await svc!.request('GET', `/functions/erasures/${erasureId}`, { 'x-api-key': key })).status).to.equal(403);
    }
    expect(watchedOther.problems).to.deep.equal([]);
    await other.close();

    // The buyer that bought the first of them: the row says its personal data is erased, rather than an empty name.
    const buyer = await watched(await browser!.newContext({ ignoreHTTPSErrors: true, viewport: SIZES.laptop }));
    await signIn(buyer.page, keys.caBuyer!, '#/bought');
    const boughtRow = buyer.page.locator(`#bought-table tr[data-lead="${ids[0]}"]`);
    await boughtRow.waitFor();
    const cells = await boughtRow.locator('td').allInnerTexts();
    expect(cells[0]).to.equal(`${ids[0]} erased`);
    expect(cells[2]).to.equal('Personal data erased');
    expect(buyer.problems).to.deep.equal([]);
    await buyer.page.context().close();
  });

  it("a webhook delivery that cannot connect shows why and when it is tried again; once erased, the lead's failing notice is a failure and its delivery cancelled", async function () {
    const run = Date.now() % 100_000;
    const email = `fl.${run}@example.com`;
    const posted = await svc!.post(leadWith(email, testMobile(5_300_000 + run), { accident_state: 'FL', zip: '33101', sid: 'fl' }), { 'x-api-key': keys.supA! });
    expect(posted.body, posted.text).to.include({ code: 'SOLD' });
    const id = posted.body.lead_id as number;
    type Delivery = { lead_id: number; status: string; attempts: number; last_error: string | null; next_attempt_at: string | null };
    const deliveryOf = async () => ((await api('/functions/deliveries?buyer=fl-hook', keys.admin!)).items as Delivery[]).find((d) => d.lead_id === id);
    await until('the error of the failed attempt on the delivery', async () => ((await deliveryOf())?.last_error ? true : null), 15_000, 100);

    const context = await browser!.newContext({ ignoreHTTPSErrors: true, viewport: SIZES.laptop });
    const { page, problems, elsewhere } = await watched(context);
    await signIn(page, keys.admin!, '#/report');
    await page.getByRole('link', { name: 'Deliveries' }).click();
    const row = page.locator(`#deliveries-table tr[data-lead="${id}"]`);
    await row.waitFor();
    const cells = await row.locator('td').allInnerTexts();
    expect(cells.slice(1, 4)).to.deep.equal(['fl-hook', 'webhook', 'Pending']);
    expect(cells[5]).to.match(UTC_TIME);
    expect(cells[6], 'last answer').to.equal('could not connect');
    expect(cells[7], 'next attempt').to.match(UTC_TIME);
    // A buyer that refused the lead: its answer in words with the HTTP status it gave.
    const refused = await svc!.post(leadWith(`az.${run}@example.com`, testMobile(5_400_000 + run), { accident_state: 'AZ', zip: '85001', sid: 'az' }), { 'x-api-key': keys.supA! });
    expect(refused.body, refused.text).to.include({ code: 'SOLD' });
    const refusedId = refused.body.lead_id as number;
    await until('the refused delivery failed', async () => ((await api('/functions/deliveries?buyer=az-refuses', keys.admin!)).items as Delivery[]).find((d) => d.lead_id === refusedId && d.status === 'failed') ?? null, 15_000, 100);
    await page.getByRole('link', { name: 'Leads' }).click();
    await page.getByRole('link', { name: 'Deliveries' }).click();
    const refusedRow = page.locator(`#deliveries-table tr[data-lead="${refusedId}"]`);
    await refusedRow.waitFor();
    const refusedCells = await refusedRow.locator('td').allInnerTexts();
    expect([refusedCells[1], refusedCells[2], refusedCells[3], refusedCells[6]]).to.deep.equal(['az-refuses', 'webhook', 'Failed Send again', 'refused by the buyer (HTTP\u00a0422)']);
    // Only a delivery that failed for good has the button: the pending one has none.
    expect(await row.getByRole('button').count()).to.equal(0);
    await shoot(page, 'admin-deliveries-webhook', () => row.waitFor());
    // At a laptop's width too every row fits whole: nothing of it scrolls out of its card.
    expect(await tableFits(page, '#deliveries-table'), 'the deliveries at a laptop\'s width').to.deep.equal([]);

    // The buyer fixed its side: Send again re-opens the delivery, the row shows it pending, and the buyer gets the lead.
    takenNow.add(refusedId);
    await refusedRow.getByRole('button', { name: `Send lead ${refusedId} again` }).click();
    const sentAgain = page.locator(`#deliveries-table tr[data-lead="${refusedId}"]`);
    await page.locator('#deliveries-message', { hasText: `Lead ${refusedId} is sent again: pending, due ` }).waitFor();
    const reopenedCells = await sentAgain.locator('td').allInnerTexts();
    expect([reopenedCells[1], reopenedCells[3], reopenedCells[4], reopenedCells[6]]).to.deep.equal(['az-refuses', 'Pending', '1', 'refused by the buyer (HTTP\u00a0422)']);
    expect(await sentAgain.getByRole('button').count()).to.equal(0);
    await shoot(page, 'admin-deliveries-sent-again', () => sentAgain.waitFor());
    await until('the refused delivery delivered once sent again', async () => ((await api('/functions/deliveries?buyer=az-refuses', keys.admin!)).items as Delivery[]).find((d) => d.lead_id === refusedId && d.status === 'delivered') ?? null, 15_000, 100);
    expect(refusing!.forLead(refusedId).map((r) => r.headers['idempotency-key'])).to.deep.equal([`lead-${refusedId}`, `lead-${refusedId}`]);
    // Sent again, it is no longer failed: a second click elsewhere (another tab) is refused in words.
    const refusedAgain = await svc!.request('POST', `/functions/deliveries/${refusedId}/redeliver`, { 'x-api-key': keys.admin! });
    expect(refusedAgain.body.code).to.equal('NOT_FAILED');
    // The lead's timeline says who sent it again, and why it is delivered now.
    await page.goto(`${origin}/console#/leads/${refusedId}`);
    const resent = page.locator('#timeline [data-type="LeadRedeliveryRequested"]');
    await resent.waitFor();
    expect(await resent.innerText()).to.contain('Sent again to az-refuses (round 2, after 1 attempt), asked by root.');
    expect(await page.locator('#timeline li').evaluateAll((lis) => lis.map((li) => li.getAttribute('data-type')).slice(-4))).to.deep.equal([
      'LeadDeliveryFailed', 'LeadRedeliveryRequested', 'LeadDeliveryAttempted', 'LeadDelivered',
    ]);

    // The consumer erased: the buyer's lead.erased notice fails to connect too, drawn as a failure.
    const erasure = await svc!.post({ email }, { 'x-api-key': keys.admin! }, '/functions/erasures');
    expect(erasure.status, erasure.text).to.equal(201);
    await until('ErasureNoticeFailed on the lead', async () => ((await api(`/functions/leads/${id}/events`, keys.admin!)).items as Array<{ type: string }>).find((e) => e.type === 'ErasureNoticeFailed'), 15_000, 100);
    await page.goto(`${origin}/console#/leads/${id}`);
    const notice = page.locator('#timeline [data-type="ErasureNoticeFailed"]').first();
    await notice.waitFor();
    expect(await notice.getAttribute('class')).to.equal('bad');
    expect(await page.locator('#timeline [data-type="LeadDeliveryFailed"]').first().getAttribute('class')).to.equal('bad');
    expect(await page.locator('#lead-consumer').innerText()).to.contain('Personal data erased');

    // Its delivery is cancelled: there is a filter for that, and the row keeps why it last failed.
    await settled();
    await page.getByRole('link', { name: 'Deliveries' }).click();
    await page.getByLabel('Status').selectOption('cancelled');
    await page.getByRole('button', { name: 'Show' }).click();
    // The rows shown stay until the answer replaces them (the list before the filter held this
    // lead too): waited for until every row is a cancelled one and this lead's among them.
    await until('the cancelled deliveries shown, this lead among them', async () => {
      const statuses = await page.locator('#deliveries-table tbody tr td:nth-child(4)').allInnerTexts();
      const shownLeads = await page.locator('#deliveries-table tbody tr').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-lead')));
      return shownLeads.includes(String(id)) && statuses.every((status) => status.includes('Cancelled'));
    });
    expect(new Set(await page.locator('#deliveries-table tbody tr td:nth-child(4)').allInnerTexts())).to.deep.equal(new Set(['Cancelled']));
    const cancelled = await page.locator(`#deliveries-table tr[data-lead="${id}"] td`).allInnerTexts();
    expect([cancelled[0], cancelled[2], cancelled[3], cancelled[6], cancelled[7]]).to.deep.equal([`${id} erased`, 'webhook', 'Cancelled', 'could not connect', '']);
    expect(elsewhere).to.deep.equal([]);
    expect(problems).to.deep.equal([]);
    await context.close();
  });

  it('long values wrap: a 200-character s1 and a 64-character buyer scroll no page sideways, push no column out of sight, and leave the bars their height', async function () {
    const s1 = `gclid.${'Cj0KCQiA2KitBhCIARIsAPPMEhL'.repeat(8)}`.slice(0, 200);
    const posted = await svc!.post(validLead({ accident_state: 'WA', zip: '98101', sid: 'long', s1 }), { 'x-api-key': keys.supA! });
    expect(posted.body, posted.text).to.include({ code: 'SOLD' });
    const id = posted.body.lead_id as number;
    await settled();
    const context = await browser!.newContext({ ignoreHTTPSErrors: true, viewport: SIZES.laptop });
    const { page, problems, elsewhere } = await watched(context);
    await signIn(page, keys.admin!, '#/report');

    // At a laptop's width the long buyer's row is whole, every column of it in sight.
    for (const [hash, table] of [['#/deliveries', '#deliveries-table'], ['#/leads', '#leads-table']] as const) {
      await page.goto(`${origin}/console${hash}`);
      await page.locator(`${table} tr[data-lead="${id}"]`).waitFor();
      expect(await tableFits(page, table), hash).to.deep.equal([]);
    }

    // The lead's page, its timeline naming the s1: nothing past the window at either width.
    await page.goto(`${origin}/console#/leads/${id}`);
    await page.locator('#timeline [data-type="LeadReceived"]').waitFor();
    for (const viewport of Object.values(SIZES)) {
      await page.setViewportSize(viewport);
      expect(await page.evaluate('document.documentElement.scrollWidth'), `the lead at ${viewport.width} px`).to.be.at.most(viewport.width);
    }
    await shoot(page, 'lead-long-values', () => page.locator('#timeline').waitFor());

    // The report by s1: each bar's label cut (its tooltip has it whole), the bars keeping most of
    // the chart's height; the table's row has its numbers in sight beside its s1.
    const day = (days: number) => new Date(Date.now() + days * 86_400_000).toISOString().slice(0, 10);
    await page.goto(`${origin}/console#/report?from=${day(-1)}&to=${day(1)}&tz=UTC&group_by=s1`);
    await page.locator('#chart-groups[data-totals]').waitFor();
    const bars = (await page.evaluate(
      "(() => { const chart = Chart.getChart(document.querySelector('#chart-groups canvas')); return { ticks: chart.scales.x.ticks.map((t) => t.label), share: chart.chartArea.height / chart.height }; })()",
    )) as { ticks: string[]; share: number };
    expect(bars.ticks).to.include(`${s1.slice(0, 23)}…`);
    expect(bars.ticks.filter((label) => label.length > 24)).to.deep.equal([]);
    expect(bars.share).to.be.greaterThan(0.6);
    const received = await page.locator('#report-table').evaluate((table, s1) => {
      const box = table.closest('.table-wrap')!.getBoundingClientRect();
      const row = [...table.querySelectorAll('tbody tr')].find((tr) => tr.children[0]!.textContent === s1)!;
      const cell = row.children[1]!.getBoundingClientRect();
      return { text: row.children[1]!.textContent, inSight: cell.left >= box.left && cell.right <= box.right };
    }, s1);
    expect(received).to.deep.equal({ text: '1', inSight: true });
    await shoot(page, 'report-long-s1', () => page.locator('#chart-groups[data-totals]').waitFor());
    expect(elsewhere).to.deep.equal([]);
    expect(problems).to.deep.equal([]);
    await context.close();
  });

  it('a key revoked mid-session ends the session: back to sign-in, saying why; signing in again returns to the page', async function () {
    const key = await svc!.key('analyst', 'short-lived');
    const context = await browser!.newContext({ ignoreHTTPSErrors: true, viewport: SIZES.laptop });
    const { page, problems, elsewhere } = await watched(context);
    await signIn(page, key, '#/report');
    await page.getByRole('link', { name: 'Leads', exact: true }).click();
    await page.locator('#rejections-by-code[data-totals]').waitFor();
    await svc!.revoke(key);
    await svc!.service.keys.refresh();

    await page.getByRole('link', { name: 'Deliveries' }).click();
    await page.locator('#signin-message', { hasText: 'This key was not accepted: it may have been revoked or expired. Sign in again.' }).waitFor();
    expect(await page.evaluate('sessionStorage.length')).to.equal(0);
    expect(await page.locator('#nav').isVisible()).to.equal(false);
    expect(await page.locator('#who').innerText()).to.equal('');
    expect(await page.locator('main').innerText()).to.not.contain('Loading').and.not.contain('Why leads were rejected');
    expect(await focused(page)).to.equal('API key');
    await shoot(page, 'key-revoked', () => page.locator('#signin-message').waitFor());

    await page.getByLabel('API key').fill(keys.analyst!);
    await page.getByLabel('API key').press('Enter');
    await page.locator('#deliveries-table tbody tr').first().waitFor();
    expect(new URL(page.url()).hash).to.equal('#/deliveries');
    expect(elsewhere).to.deep.equal([]);
    expect(problems.length).to.be.greaterThan(0);
    expect(problems.filter((p) => p !== `${refused('401')} (Unauthorized)`)).to.deep.equal([]);
    await context.close();
  });

  /**
   * Holds the page's requests whose path matches `path` until `release` is called; `answered`
   * resolves once each one held has its answer in the page.
   */
  async function holding(page: Page, path: RegExp) {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const answers: Array<Promise<unknown>> = [];
    await page.route(path, async (route) => {
      answers.push(page.waitForResponse((response) => response.request() === route.request()));
      await released;
      await route.continue();
    });
    return { held: () => answers.length, release, answered: async () => Promise.all(answers) };
  }
  /** A round trip from the page, after the answers it had: what they set off in it has run by then. */
  const roundTrip = (page: Page) => page.evaluate(() => fetch('/healthz').then((r) => r.status));

  it("signing out while a lead's page loads: once its answers come, nothing of the lead is drawn under the sign-in form", async function () {
    const context = await browser!.newContext({ ignoreHTTPSErrors: true, viewport: SIZES.laptop });
    const { page, problems } = await watched(context);
    await signIn(page, keys.supA!, '#/leads');
    const lead = await holding(page, new RegExp(`/functions/leads/${leads.caSold}\\b`));
    await page.goto(`${origin}/console#/leads/${leads.caSold}`);
    await until('the lead asked for', () => lead.held() > 0);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.locator('form[aria-labelledby="signin-title"]').waitFor();

    lead.release();
    await lead.answered();
    await roundTrip(page);
    expect(await page.evaluate("[...document.querySelector('main').children].map((child) => child.tagName)")).to.deep.equal(['FORM']);
    expect(await page.locator('main').innerText()).to.not.contain('Ada').and.not.contain('@example.com');
    expect(problems).to.deep.equal([]);
    await context.close();
  });

  it("a late 401 to a request of a key signed out since does not end the next key's session", async function () {
    const gone = await svc!.key('analyst', 'revoked-while-asking');
    const context = await browser!.newContext({ ignoreHTTPSErrors: true, viewport: SIZES.laptop });
    const { page } = await watched(context);
    await signIn(page, gone, '#/report');
    await page.getByRole('link', { name: 'Deliveries' }).click();
    await page.locator('#deliveries-table tbody tr').first().waitFor();
    await svc!.revoke(gone);
    await svc!.service.keys.refresh();
    // A Show whose answer is slow (held here), then another page: its calls are refused, the session ends.
    const slow = await holding(page, /\/functions\/deliveries\?/);
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    await until('the slow Show asked', () => slow.held() > 0);
    await page.goto(`${origin}/console#/leads`);
    await page.locator('#signin-message', { hasText: 'This key was not accepted' }).waitFor();

    await page.getByLabel('API key').fill(keys.analyst!);
    await page.getByLabel('API key').press('Enter');
    await page.locator('#leads-table tbody tr').first().waitFor();
    slow.release();
    await slow.answered();
    await roundTrip(page);
    expect(await page.evaluate('sessionStorage.length'), 'still signed in').to.equal(1);
    expect(await page.locator('#who').innerText()).to.equal('ann (analyst)');
    expect(await page.locator('#signin-message').count()).to.equal(0);
    await context.close();
  });

  it('the service unreachable: said in words in error style, what is shown marked out of date, the header not ready; the next answer clears it', async function () {
    const context = await browser!.newContext({ ignoreHTTPSErrors: true, viewport: SIZES.laptop });
    const { page, problems, elsewhere } = await watched(context);
    await signIn(page, keys.analyst!, '#/report');
    await page.locator('#chart-daily[data-totals]').waitFor();
    await page.locator('#readiness[data-ready="true"]').waitFor();
    const cut = (route: { abort: (code: string) => Promise<void> }) => route.abort('connectionrefused');
    await page.route(/\/(functions|readyz)\b/, cut);

    await page.getByRole('button', { name: 'Show', exact: true }).click();
    const status = page.locator('#report-status');
    await status.filter({ hasText: 'The service cannot be reached. Try again.' }).waitFor();
    expect(await page.evaluate("getComputedStyle(document.getElementById('report-status')).color")).to.equal(ERROR_COLOUR);
    expect((await page.locator('main').getAttribute('class')) ?? '').to.contain('stale');
    // Marked out of date by a dashed frame and grey, not faded: its text keeps its contrast (WCAG AA).
    expect(await page.evaluate("[...document.querySelectorAll('main .results')].map((el) => { const s = getComputedStyle(el); return [s.opacity, s.filter, s.outlineStyle].join(' '); })")).to.deep.equal(
      ['1 grayscale(1) dashed', '1 grayscale(1) dashed'],
    );
    await page.locator('#readiness[data-ready="false"]').waitFor();
    expect(await page.locator('#readiness').innerText()).to.match(/^Service unreachable/);
    await shoot(page, 'unreachable', () => status.waitFor());

    // A report by state asked for now: the same words, under headings that name its grouping.
    await page.goto(`${origin}/console#/report?group_by=state`);
    await page.getByRole('heading', { name: 'By state', exact: true }).waitFor({ timeout: 5000 });
    await page.locator('#report-status', { hasText: 'The service cannot be reached. Try again.' }).waitFor();

    // Another page: the same words, not "Loading…" for ever.
    await page.getByRole('link', { name: 'Deliveries' }).click();
    await page.locator('#deliveries-message', { hasText: 'The service cannot be reached. Try again.' }).waitFor();

    // Opened again meanwhile, the console cannot ask whose key it holds: it says so and offers to try again or sign out.
    await page.reload();
    await page.locator('#me-failed', { hasText: 'The service cannot be reached. Try again.' }).waitFor();
    expect(await focused(page)).to.equal('Try again');
    expect(await page.getByRole('button', { name: 'Sign out' }).filter({ visible: true }).count()).to.equal(1);

    // Back: the next answer clears the mark and the header is ready again.
    await page.unroute(/\/(functions|readyz)\b/, cut);
    await page.getByRole('button', { name: 'Try again' }).press('Enter');
    await page.locator('#deliveries-table tbody tr').first().waitFor();
    await page.locator('#readiness[data-ready="true"]').waitFor();
    expect((await page.locator('main').getAttribute('class')) ?? '').to.not.contain('stale');
    expect(elsewhere).to.deep.equal([]);
    expect(problems.filter((p) => !/net::ERR_CONNECTION_REFUSED|net::ERR_FAILED/.test(p))).to.deep.equal([]);
    await context.close();
  });

  const tableFits = (page: Page, table: string) => page.evaluate(`(${TABLE_FITS})(document.querySelector(${JSON.stringify(table)}))`) as Promise<string[]>;

  /** A table as Chromium's accessibility tree has it (what a screen reader is given): its role, its column headers' names, its rows, and the cells of its first row of data. */
  async function axTable(page: Page, table: string): Promise<{ role: string; headers: string[]; rows: number; firstRow: string[] }> {
    const cdp = await page.context().newCDPSession(page);
    try {
      await cdp.send('Accessibility.enable');
      const { root } = await cdp.send('DOM.getDocument');
      const { nodeId } = await cdp.send('DOM.querySelector', { nodeId: root.nodeId, selector: table });
      const { nodeId: firstRow } = await cdp.send('DOM.querySelector', { nodeId: root.nodeId, selector: `${table} > tbody > tr` });
      const query = async (at: number, role?: string) => (await cdp.send('Accessibility.queryAXTree', { nodeId: at, ...(role ? { role } : {}) })).nodes;
      const nameOf = (node: { name?: { value?: unknown } }) => String(node.name?.value ?? '');
      const [self] = (await cdp.send('Accessibility.getPartialAXTree', { nodeId, fetchRelatives: false })).nodes;
      return {
        role: String(self?.role?.value),
        headers: (await query(nodeId, 'columnheader')).map(nameOf),
        rows: (await query(nodeId, 'row')).length,
        firstRow: (await query(firstRow, 'cell')).map(nameOf),
      };
    } finally {
      await cdp.detach();
    }
  }

  it("at a phone's width each list shows every row whole, its status and times on screen, and nothing scrolls sideways; its table is still a table", async function () {
    const context = await browser!.newContext({ ignoreHTTPSErrors: true, viewport: SIZES.phone });
    const { page, problems, elsewhere } = await watched(context);
    const lists = [
      { key: keys.analyst!, first: '#/report', hash: '#/deliveries', table: '#deliveries-table', label: 'Deliveries' },
      { key: keys.analyst!, first: '#/report', hash: '#/leads', table: '#leads-table', label: 'Leads' },
      { key: keys.analyst!, first: '#/report', hash: '#/report', table: '#report-table', label: 'Rows' },
      { key: keys.caBuyer!, first: '#/bought', hash: '#/bought', table: '#bought-table', label: 'Bought leads' },
    ];
    let signedIn = '';
    const found: Record<string, unknown> = {};
    const wanted: Record<string, unknown> = {};
    for (const list of lists) {
      if (signedIn !== list.key) {
        if (signedIn) {
          await page.getByRole('button', { name: 'Sign out' }).click();
          await page.getByLabel('API key').waitFor();
        }
        await signIn(page, list.key, list.first);
        signedIn = list.key;
      }
      await page.goto(`${origin}/console${list.hash}`);
      await page.locator(`${list.table} > tbody > tr`).first().waitFor();
      const name = list.table.slice(1);
      // Still a table to a screen reader: every column named, a row per row, each cell its own.
      const heads = await page.locator(`${list.table} thead th`).allTextContents();
      const rows = await page.locator(`${list.table} tbody tr, ${list.table} tfoot tr`).count();
      const pageWidth = await page.evaluate('[document.scrollingElement.scrollWidth, document.scrollingElement.clientWidth]');
      found[name] = { pageWidth, problems: await tableFits(page, list.table), ax: await axTable(page, list.table) };
      const firstRow = await page.locator(`${list.table} > tbody > tr`).first().locator('td').allTextContents();
      wanted[name] = { pageWidth: [SIZES.phone.width, SIZES.phone.width], problems: [], ax: { role: 'table', headers: heads, rows: 1 + rows, firstRow: firstRow.map((text) => text.trim()) } };
      await page.screenshot({ path: join(SHOTS, `phone-${name}.png`), fullPage: true });
    }
    expect(found).to.deep.equal(wanted);

    // The deliveries' essentials, by heading: each row's lead, buyer or bucket, status and times,
    // on screen, and the status the API gives.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await signIn(page, keys.analyst!, '#/report');
    await page.goto(`${origin}/console#/deliveries`);
    const listed = (await api('/functions/deliveries?limit=50', keys.analyst!)).items as Array<{ lead_id: number; status: string }>;
    await page.locator('#deliveries-message', { hasText: `${listed.length} deliveries shown.` }).waitFor();
    const essentials = ['Lead', 'Buyer or bucket', 'Status', 'Last attempt', 'Next attempt'];
    const seen = await page.locator('#deliveries-table').evaluate((table, essentials) => {
      const width = table.ownerDocument.documentElement.clientWidth;
      const heads = [...table.querySelectorAll('thead th')].map((th) => th.textContent);
      return [...table.querySelectorAll('tbody tr')].map((tr) => {
        const cell = (heading: string) => tr.children[heads.indexOf(heading)]!;
        const out = essentials.filter((heading) => {
          const r = cell(heading).getBoundingClientRect();
          return cell(heading).textContent !== '' && !(cell(heading).checkVisibility() && r.left >= 0 && r.right <= width);
        });
        // The status in words, the API's code at hand.
        return { lead_id: Number(tr.getAttribute('data-lead')), status: cell('Status').querySelector('[data-code]')?.getAttribute('data-code'), out };
      });
    }, essentials);
    expect(seen).to.deep.equal(listed.map((d) => ({ lead_id: d.lead_id, status: d.status, out: [] })));
    expect(elsewhere).to.deep.equal([]);
    expect(problems).to.deep.equal([]);
    await context.close();
  });

  it('a list longer than a page: the last More by keyboard puts the focus on the first lead it added', async function () {
    const key = await svc!.key('supplier', 'sup-many');
    const ids: number[] = [];
    for (let i = 0; i < 51; i++) ids.push((await svc!.post(validLead({ zip: 'bad', sid: 'many' }), { 'x-api-key': key })).body.lead_id as number);
    await settled();
    const context = await browser!.newContext({ ignoreHTTPSErrors: true, viewport: SIZES.laptop });
    const { page, problems, elsewhere } = await watched(context);
    await signIn(page, key, '#/leads');
    const rows = page.locator('#leads-table tbody tr');
    await page.locator('#leads-message', { hasText: /^50 leads shown/ }).waitFor();
    const more = page.getByRole('button', { name: 'More' });
    await more.focus();
    await page.keyboard.press('Enter');
    await page.locator(`#leads-table tr[data-lead="${ids[0]}"]`).waitFor();
    expect(await rows.count()).to.equal(51);
    expect(await more.isVisible()).to.equal(false);
    expect(await focused(page)).to.equal(String(ids[0]));
    expect(elsewhere).to.deep.equal([]);
    expect(problems).to.deep.equal([]);
    await context.close();
  });
});
