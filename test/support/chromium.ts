import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import type { Context } from 'mocha';

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
