import { expect } from 'chai';
import { fileURLToPath } from 'node:url';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import { API_KEYS_STREAM, initialKeyState, issueKey, newKeyMaterial } from '../../src/keys/api-keys.js';
import { type ChildResult, runChild } from '../support/child.js';
import { tempDir } from '../support/tmp.js';

// `leadpost … | head -1`: the reader goes away after a line. The command stops quietly, as a Unix
// tool killed by SIGPIPE does: exit 141, nothing on stderr (it once died of an unhandled EPIPE
// 'error' event, with a stack trace).

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));
/** 128 + SIGPIPE. */
const CUT_SHORT = 141;

/**
 * Runs the CLI with stdout piped and closes the pipe once the first line has arrived. The output is
 * megabytes, far more than a pipe holds, so the command is still writing when its reader goes.
 */
async function firstLineOnly(args: string[], env: Record<string, string>): Promise<{ first: string; result: ChildResult }> {
  const child = runChild(args, env, { script: BIN });
  await child.until('', 1);
  const first = child.lines[0]!;
  child.process.stdout!.destroy();
  return { first, result: await child };
}

function quiet(result: ChildResult): void {
  expect([result.code, result.signal], result.stderr).to.deep.equal([CUT_SHORT, null]);
  expect(result.stderr).to.equal('');
}

describe('a CLI command whose output is cut short', function () {
  this.timeout(120_000);
  const dir = tempDir('cli-cut');
  const env = { LEADPOST_DATA_DIR: dir.path };

  before(async function () {
    const store = await EmbeddedEventStore.open(dir.path);
    try {
      // Each about 200 bytes as `events` prints it: some 4 MB in all.
      const padding = 'x'.repeat(100);
      for (let batch = 0; batch < 4; batch++) {
        await store.append('long-stream', Array.from({ length: 5000 }, (_, i) => ({ type: 'Noted', data: { n: batch * 5000 + i, padding }, metadata: {} })));
      }
      // Some 80 bytes a row in `keys list`: some 1.6 MB.
      const now = Date.now();
      // Appended as changeKeys would, in one go: through it, folding key by key takes half a minute.
      const issued = Array.from({ length: 20_000 }, (_, i) => ({ ...newKeyMaterial(), i })).flatMap(({ id, secret, i }) => issueKey(initialKeyState, { role: 'supplier', name: `supplier-${i}`, now, id, secret }));
      await store.append(API_KEYS_STREAM, issued.map((event) => ({ ...event, metadata: { schema: 1, occurred_at: new Date(now).toISOString() } })));
    } finally {
      await store.close();
    }
  });

  after(() => dir.remove());

  it('events STREAM | head -1 stops quietly with exit 141', async function () {
    const { first, result } = await firstLineOnly(['events', 'long-stream'], env);
    expect(first).to.match(/^#0 Noted /);
    quiet(result);
  });

  it('keys list | head -1 stops quietly with exit 141', async function () {
    const { first, result } = await firstLineOnly(['keys', 'list'], env);
    expect(first).to.match(/^ID +ROLE +NAME/);
    quiet(result);
  });

  it('output read to its end still exits 0', async function () {
    const result = await runChild(['keys', 'list', '--json'], env, { script: BIN });
    expect(result.code, result.stderr).to.equal(0);
    expect(JSON.parse(result.lines[0]!)).to.have.length(20_000);
  });
});
