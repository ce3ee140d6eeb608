import { expect } from 'chai';
import { fileURLToPath } from 'node:url';
import { runChild } from '../support/child.js';
import { tempDir } from '../support/tmp.js';

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));

describe('leadpost CLI', function () {
  it('--help lists the commands and exits 0', async function () {
    const result = await runChild(['--help'], {}, { script: BIN });
    expect(result.code).to.equal(0);
    expect(result.lines.join('\n')).to.contain('serve');
  });

  it('an unknown command says so and exits 1', async function () {
    const result = await runChild(['frobnicate'], {}, { script: BIN });
    expect(result.code).to.equal(1);
    expect(result.stderr).to.contain("unknown command 'frobnicate'");
  });

  it('serve opens the embedded store in LEADPOST_DATA_DIR and stops cleanly on SIGTERM', async function () {
    const dir = tempDir('cli');
    try {
      const child = runChild(['serve'], { LEADPOST_DATA_DIR: dir.path }, { script: BIN });
      await child.until('{', 1);
      expect(JSON.parse(child.lines[0]!)).to.include({ store: 'embedded', dataDir: dir.path });
      child.process.kill('SIGTERM');
      const result = await child;
      expect(result.code).to.equal(0);
    } finally {
      dir.remove();
    }
  });
});
