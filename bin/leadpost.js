#!/usr/bin/env -S node --max-old-space-size=128
// The CLI is written in TypeScript and compiled to dist/ by `npm ci` (the prepare script).
import { main } from '../dist/src/cli/main.js';

main(process.argv.slice(2)).then(
  (code) => { if (typeof code === 'number') process.exitCode = code; },
  // main reports a command's failure itself, in one line; should it ever reject, the same line.
  (err) => { console.error(`leadpost: ${err instanceof Error ? err.message : err}`); process.exitCode = 1; },
);
