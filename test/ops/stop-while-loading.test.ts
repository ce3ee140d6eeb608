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
