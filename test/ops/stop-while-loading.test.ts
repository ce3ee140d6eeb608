import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { tempDir } from '../support/tmp.js';

// A container stopped as it starts: `leadpost serve` given SIGTERM (or SIGINT) while its modules
// still load, before the service listens for its stop signals, stops cleanly (exit 0) instead of
// being killed by the signal (143). The signal is sent 150 ms after the spawn: Node has started
// by then, and loading the modules takes longer than that.

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));

describe('leadpost serve: a stop signal while it loads', function () {
  this.timeout(30_000);

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`${signal} ends it with exit 0, not by the signal`, async function () {
      const dir = tempDir('stop-while-loading');
      try {
        const child = spawn(process.execPath, [BIN, 'serve'], {
          env: { ...process.env, LEADPOST_DATA_DIR: dir.path, PORT: '0', HTTP_PORT: '0', HOST: '127.0.0.1' },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let output = '';
        child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
        child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
        const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('exit', (code, killedBy) => resolve([code, killedBy])));
        // A fixed pace, not a wait for an event: loading shows nothing outside the process (see above).
        await new Promise((resolve) => setTimeout(resolve, 150));
        child.kill(signal);
        const [code, killedBy] = await exited;
        expect({ code, killedBy }, output).to.deep.equal({ code: 0, killedBy: null });
        expect(output).to.not.match(/Error|at .*\.js:\d+/);
      } finally {
        dir.remove();
      }
    });
  }
});

// A signal that comes while the last modules are evaluated is taken by the event loop only after
// the import has finished. Removing the loading listener then, before main had listened, closed
// the signal's handle and dropped the signal: the service started and served on. Starts stopped at
// offsets across the loading window, several at a time: every one must end, with exit 0.
describe('leadpost serve: a stop signal at any moment of loading', function () {
  this.timeout(120_000);

  it('SIGTERM at offsets across the loading window always ends it with exit 0, never lost', async function () {
    const offsets = Array.from({ length: 12 }, (_, i) => 250 + i * 100);
    const outcomes: string[] = [];
    for (let round = 0; round < offsets.length; round += 4) {
      await Promise.all(
        offsets.slice(round, round + 4).map(async (offset) => {
          const dir = tempDir('stop-race');
          try {
            const child = spawn(process.execPath, [BIN, 'serve'], {
              env: { ...process.env, LEADPOST_DATA_DIR: dir.path, PORT: '0', HTTP_PORT: '0', HOST: '127.0.0.1', MX_LOOKUP: '0' },
              stdio: ['ignore', 'ignore', 'ignore'],
            });
            const exited = new Promise<string>((resolve) => child.on('exit', (code, killedBy) => resolve(`exit ${code ?? killedBy}`)));
            await new Promise((resolve) => setTimeout(resolve, offset));
            child.kill('SIGTERM');
            // Within the 10 s a stop may take, with room: a lost signal never ends it.
            const late = new Promise<string>((resolve) => setTimeout(() => resolve('still running 15 s after SIGTERM'), 15_000).unref());
            const outcome = await Promise.race([exited, late]);
            if (outcome !== 'exit 0') child.kill('SIGKILL');
            outcomes.push(`${offset} ms: ${outcome}`);
          } finally {
            dir.remove();
          }
        }),
      );
    }
    expect(outcomes.filter((o) => !o.endsWith('exit 0'))).to.deep.equal([]);
  });
});
