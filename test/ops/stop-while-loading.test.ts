import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { tempDir } from '../support/tmp.js';

// A container stopped as it starts: `leadpost serve` given SIGTERM (or SIGINT) while its modules
// still load, before the service listens for its stop signals, stops cleanly (exit 0) instead of
// being killed by the signal (143). The signal is sent once the CLI listens for it (its first
// statement), and loading the modules takes longer than the moment after that.

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));

/**
 * Node's own start-up catches SIGTERM and SIGINT only to die by them, so a signal sent before the
 * CLI's first statement kills the process whatever the CLI does; on a busy machine that start-up
 * alone took over 350 ms, so a fixed delay was no measure. A module loaded before the CLI says on
 * stderr when the CLI first listens for SIGTERM, which is what the signal is timed from.
 */
const SAYS_LISTENING = `data:text/javascript,${encodeURIComponent(
  "process.on('newListener', (event) => { if (event === 'SIGTERM') process.stderr.write(new Error().stack.includes('/bin/leadpost.js') ? 'listening: bin\\n' : 'listening: later\\n'); });",
)}`;

/** `leadpost serve`, and a promise of the moment it first listens for SIGTERM: by the CLI's first statements (bin), or only later. */
function serve(env: Record<string, string>, output: (text: string) => void = () => {}) {
  const child = spawn(process.execPath, ['--import', SAYS_LISTENING, BIN, 'serve'], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.on('data', (chunk: Buffer) => output(chunk.toString()));
  const listening = new Promise<string>((resolve) => {
    let seen = '';
    child.stderr.on('data', (chunk: Buffer) => {
      const text = chunk.toString();
      output(text.replace(/listening: \w+\n/g, ''));
      seen += text;
      const by = /listening: (\w+)\n/.exec(seen);
      if (by) resolve(by[1]!);
    });
  });
  return { child, listening };
}

describe('leadpost serve: a stop signal while it loads', function () {
  this.timeout(30_000);

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`${signal} ends it with exit 0, not by the signal`, async function () {
      const dir = tempDir('stop-while-loading');
      try {
        let output = '';
        const { child, listening } = serve({ LEADPOST_DATA_DIR: dir.path, PORT: '0', HTTP_PORT: '0', HOST: '127.0.0.1' }, (text) => (output += text));
        const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('exit', (code, killedBy) => resolve([code, killedBy])));
        // Listening, its modules are still loading: a moment later they still are.
        expect(await listening, 'who listens first').to.equal('bin');
        await new Promise((resolve) => setTimeout(resolve, 20));
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

// A reload sent to every instance while one of them starts: SIGHUP while its modules load ends
// nothing (Node's default would kill it, silently, with 129); it starts and serves, and a stop then
// ends it as any other.
describe('leadpost serve: SIGHUP while it loads', function () {
  this.timeout(60_000);

  it('is ignored: the service starts and listens, and SIGTERM then stops it with exit 0', async function () {
    const dir = tempDir('hup-while-loading');
    try {
      let output = '';
      const { child, listening } = serve({ LEADPOST_DATA_DIR: dir.path, PORT: '0', HTTP_PORT: '0', HOST: '127.0.0.1', MX_LOOKUP: '0' }, (text) => (output += text));
      const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('exit', (code, killedBy) => resolve([code, killedBy])));
      expect(await listening, 'who listens first').to.equal('bin');
      await new Promise((resolve) => setTimeout(resolve, 20));
      child.kill('SIGHUP');
      const started = await new Promise<boolean>((resolve) => {
        const look = setInterval(() => {
          if (output.includes('"leadpost listening"')) {
            clearInterval(look);
            resolve(true);
          }
        }, 20);
        void exited.then(() => (clearInterval(look), resolve(false)));
      });
      expect(started, `it listened after the SIGHUP: ${output}`).to.equal(true);
      child.kill('SIGTERM');
      expect(await exited).to.deep.equal([0, null]);
    } finally {
      dir.remove();
    }
  });
});

// A signal that comes while the last modules are evaluated is taken by the event loop only after
// the import has finished. Removing the loading listener then, before main had listened, closed
// the signal's handle and dropped the signal: the service started and served on. Starts stopped at
// offsets across the loading window, several at a time: every one must end, with exit 0.
describe('leadpost serve: a stop signal at any moment of loading', function () {
  this.timeout(120_000);

  it('SIGTERM at offsets across the loading window always ends it with exit 0, never lost', async function () {
    // From the moment the CLI first listens for the signal (its first statement), across its loading.
    const offsets = Array.from({ length: 12 }, (_, i) => i * 100);
    const outcomes: string[] = [];
    for (let round = 0; round < offsets.length; round += 4) {
      await Promise.all(
        offsets.slice(round, round + 4).map(async (offset) => {
          const dir = tempDir('stop-race');
          try {
            const { child, listening } = serve({ LEADPOST_DATA_DIR: dir.path, PORT: '0', HTTP_PORT: '0', HOST: '127.0.0.1', MX_LOOKUP: '0' });
            const exited = new Promise<string>((resolve) => child.on('exit', (code, killedBy) => resolve(`exit ${code ?? killedBy}`)));
            if ((await listening) !== 'bin') outcomes.push(`${offset} ms: the CLI did not listen first`);
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
