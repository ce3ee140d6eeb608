import { expect } from 'chai';
import { type Browser } from 'playwright-core';
import { OUTCOMES } from '../../src/http/envelope.js';
import { launchChromium, skipWithoutChromium } from '../support/chromium.js';
import { TestService } from '../support/service.js';

// /docs in a real browser against the running service. The page must render from the service
// alone (nothing from another origin, nothing the CSP blocks) and show the lead post and every
// outcome code.

describe('/docs in a browser', function () {
  this.timeout(90_000);
  let svc: TestService | undefined;
  let browser: Browser | undefined;

  before(async function () {
    skipWithoutChromium(this);
    svc = await TestService.start();
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await svc?.stop();
  });

  it('renders the reference from the service alone: the lead post, its responses and every outcome code', async function () {
    const origin = `https://127.0.0.1:${svc!.port}`;
    const context = await browser!.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1280, height: 1000 } });
    const page = await context.newPage();
    const elsewhere: string[] = [];
    const problems: string[] = [];
    page.on('request', (req) => {
      if (!req.url().startsWith(origin) && !req.url().startsWith('data:')) elsewhere.push(req.url());
    });
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`console: ${message.text()}`);
    });

    const response = await page.goto(`${origin}/docs`);
    expect(response?.status()).to.equal(200);
    const post = page.locator('#operations-Suppliers-postFunctionsLeads');
    await post.locator('.opblock-summary').waitFor({ timeout: 60_000 });
    expect(await post.locator('.opblock-summary-method').innerText()).to.equal('POST');
    expect(await post.locator('.opblock-summary-path').innerText()).to.equal('/functions/leads');

    const text = await page.locator('body').innerText();
    expect(text).to.contain('Outcome codes');
    for (const [code, outcome] of Object.entries(OUTCOMES)) expect(text, code).to.match(new RegExp(`${code}\\s+${outcome.status}`));

    // Opened, the post lists its statuses with the codes behind each.
    await post.locator('.opblock-summary').click();
    await post.locator('.responses-table').first().waitFor();
    const statuses = await post.locator('.responses-table > tbody > tr.response').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-code')));
    expect(statuses).to.include.members(['201', '400', '401', '403', '409', '413', '415', '422', '429', '500', '503']);
    const opened = await post.innerText();
    for (const code of ['SOLD', 'UNSOLD', 'INVALID', 'VERIFICATION_FAILED', 'DUPLICATE', 'RATE_LIMITED', 'IDEMPOTENCY_CONFLICT']) expect(opened, code).to.contain(code);

    expect(elsewhere, 'requests to other origins').to.deep.equal([]);
    expect(problems).to.deep.equal([]);
    await context.close();
  });
});
