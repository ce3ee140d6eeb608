#!/usr/bin/env -S node --max-old-space-size=128
// The CLI is written in TypeScript and compiled to dist/ by `npm ci` (the prepare script).
import { main } from '../dist/src/cli/main.js';

main(process.argv.slice(2)).then(
  (code) => { if (typeof code === 'number') process.exitCode = code; },
  (err) => { console.error(err instanceof Error ? err.message : err); process.exitCode = 1; },
);
