import { expect } from 'chai';
import { existsSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeDirectory } from '../../src/make-directory.js';
import { runChild } from '../support/child.js';
import { tempDir } from '../support/tmp.js';

// The directories the service makes: the data dir (each embedded store), the master key's, the
// self-signed certificate's. Under /proc Node's own recursive mkdir never returns; start-up
// refuses such a data dir first (test/ops/config.test.ts), and here each place that makes one
// ends in an error naming it too, whoever calls it.

const CHILD = fileURLToPath(new URL('./make-directory-child.js', import.meta.url));
/** A maker that spins is killed by then: the test fails rather than hang. */
const CHILD_DEADLINE_MS = 15_000;

describe('making the directories the service keeps its files in', function () {
  this.timeout(30_000);
  let dir: ReturnType<typeof tempDir>;
  beforeEach(() => (dir = tempDir('make-directory')));
  afterEach(() => dir.remove());

  it('makes a directory and each missing parent with the mode given; one already there is fine', function () {
    const deepest = join(dir.path, 'a', 'b', 'c');
    makeDirectory(deepest, 0o700);
    for (const made of [join(dir.path, 'a'), join(dir.path, 'a', 'b'), deepest]) {
      expect(statSync(made).isDirectory()).to.equal(true);
      expect(statSync(made).mode & 0o777, made).to.equal(0o700 & ~process.umask());
    }
    makeDirectory(deepest, 0o700);
    makeDirectory(dir.path);
  });

  it('refuses a file in the way, naming it', function () {
    const file = join(dir.path, 'a-file');
    writeFileSync(file, 'x');
    expect(() => makeDirectory(file)).to.throw(`cannot make the directory ${file}: a file of that name is in the way`);
    expect(() => makeDirectory(join(file, 'data'))).to.throw(/ENOTDIR/);
  });

  it('under /proc, every maker (the stores, the master key, the certificate) ends in an error naming the directory, where recursive mkdir spun for ever', async function () {
    if (!existsSync('/proc/self')) {
      console.log('      skipped: this system has no /proc, the filesystem whose directories refuse new entries');
      this.skip();
    }
    const under = `/proc/leadpost-${process.pid}`;
    const child = runChild([under], {}, { script: CHILD });
    const deadline = setTimeout(() => child.process.kill('SIGKILL'), CHILD_DEADLINE_MS);
    const result = await child.finally(() => clearTimeout(deadline));
    const answers = result.lines.map((line) => JSON.parse(line) as { what: string; made?: true; error?: string });
    expect(result.signal, `killed after ${CHILD_DEADLINE_MS} ms, having answered: ${result.lines.join(' ')}`).to.equal(null);
    expect(answers.map((a) => a.what)).to.deep.equal(['directory', 'events', 'read_models', 'keys', 'master_key', 'tls']);
    for (const answer of answers) {
      expect(answer.error, answer.what).to.be.a('string');
      expect(answer.error, answer.what).to.contain(`cannot make the directory ${under}: /proc takes no new directory (a kernel filesystem, proc, that keeps no files)`);
    }
  });
});
