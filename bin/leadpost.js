#!/usr/bin/env -S node --max-old-space-size=128
// The CLI is written in TypeScript and compiled to dist/ by `npm ci` (the prepare script).

// Loading the modules takes a second or two on a slow machine, before `serve` listens for its stop
// signals: a SIGTERM then (a container stopped as it starts) would kill the process with 143. As
// nothing is open yet, it is a clean stop: exit 0, as a stop asked later in start-up ends.
const serving = process.argv[2] === 'serve';
const stopWhileLoading = () => process.exit(0);
if (serving) for (const signal of ['SIGTERM', 'SIGINT']) process.once(signal, stopWhileLoading);
// SIGHUP would kill it too, silently: a reload sent to every instance while one is starting. Nothing
// is loaded yet to reload, so it is ignored (main says so for one that comes later in start-up).
// Kept for good: taking it off could drop a SIGHUP on its way to main's listener (see below).
if (serving) process.on('SIGHUP', () => {});
const { main } = await import('../dist/src/cli/main.js');

// main listens for the stop signals itself in its first, synchronous steps, so this listener goes
// only after main's is there. Removed first, it was the signal's last listener: Node then closes
// the signal's handle, and a signal that came while the last modules were evaluated, not yet
// handed to a listener, was lost with it, and the service started and served on.
const ran = main(process.argv.slice(2));
if (serving) for (const signal of ['SIGTERM', 'SIGINT']) process.off(signal, stopWhileLoading);
ran.then(
  (code) => { if (typeof code === 'number') process.exitCode = code; },
  // main reports a command's failure itself, in one line; should it ever reject, the same line.
  (err) => { console.error(`leadpost: ${err instanceof Error ? err.message : err}`); process.exitCode = 1; },
);
