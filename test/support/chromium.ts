import { existsSync, mkdirSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import type { Context } from 'mocha';
import { type Browser, type Page, chromium } from 'playwright-core';

// Where the browser tests find Chromium: Debian's package, driven by playwright-core (which
// downloads no browser of its own). CI installs it (README, .ci/run).

/** CHROMIUM_PATH, else the first `chromium` on PATH (Debian puts it in /usr/bin). */
export const CHROMIUM =
  process.env.CHROMIUM_PATH ??
  (process.env.PATH ?? '').split(delimiter).map((dir) => join(dir, 'chromium')).find((file) => existsSync(file)) ??
  '/usr/bin/chromium';

/** Skips the suite, saying why, when there is no Chromium to drive. */
export function skipWithoutChromium(suite: Context): void {
  if (!existsSync(CHROMIUM)) {
    console.warn(`      skipped: no Chromium at ${CHROMIUM}; install it (apt-get install chromium) or set CHROMIUM_PATH`);
    suite.skip();
  }
}

/** Chromium launched for a suite, and `shots` (where it saves its screenshots) made, when given. */
export async function launchChromium(shots?: string): Promise<Browser> {
  const browser = await chromium.launch({ executablePath: CHROMIUM });
  if (shots !== undefined) mkdirSync(shots, { recursive: true });
  return browser;
}

/** Signs in to the console at `origin` with `key`, by keyboard, as a user does. */
export async function signIn(page: Page, origin: string, key: string): Promise<void> {
  await page.goto(`${origin}/console`);
  await page.getByLabel('API key').fill(key);
  await page.getByLabel('API key').press('Enter');
}

/**
 * A page of a new browser context (a laptop's window unless told), signed in to the console at
 * `origin` with `key` and shown its menu, then at `hash` (`#/leads`) when given.
 */
export async function signedInPage(
  browser: Browser,
  origin: string,
  key: string,
  { hash, viewport = { width: 1280, height: 800 }, deviceScaleFactor = 1 }: { hash?: string; viewport?: { width: number; height: number }; deviceScaleFactor?: number } = {},
): Promise<Page> {
  const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport, deviceScaleFactor });
  const page = await context.newPage();
  await signIn(page, origin, key);
  await page.locator('#nav a').first().waitFor();
  if (hash !== undefined) await page.goto(`${origin}/console${hash}`);
  return page;
}
