import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { runConsumerCommand, runEraseCommand } from '../../src/cli/erase.js';
import { runDeliveriesCommand } from '../../src/cli/deliveries.js';
import { runEventsCommand } from '../../src/cli/events.js';
import { runHealthCommand } from '../../src/cli/health.js';
import type { CliIo } from '../../src/cli/io.js';
import { runKeysCommand } from '../../src/cli/keys.js';
import { runMasterKeyCommand } from '../../src/cli/master-key.js';
import { runReplayCommand } from '../../src/cli/replay.js';
import { runInstancesCommand } from '../../src/cli/instances.js';
import { runRoutingCommand } from '../../src/cli/routing.js';
import { runSealClearLeadsCommand } from '../../src/cli/seal-clear-leads.js';
import { SERVE_USAGE } from '../../src/cli/serve-help.js';

// The README's CLI table against each command's own `--help` (what `leadpost COMMAND --help`
// prints): every option a command's help shows is in the table, on a row of that command, so the
// table never lags behind the binary.

const README = fileURLToPath(new URL('../../../README.md', import.meta.url));

const COMMANDS: Record<string, (args: string[], io: CliIo) => Promise<number>> = {
  serve: async (_args, io) => (io.out.write(`${SERVE_USAGE}\n`), 0),
  keys: runKeysCommand,
  events: runEventsCommand,
  deliveries: runDeliveriesCommand,
  replay: runReplayCommand,
  erase: runEraseCommand,
  consumer: runConsumerCommand,
  'seal-clear-leads': runSealClearLeadsCommand,
  'master-key': runMasterKeyCommand,
  health: runHealthCommand,
  routing: runRoutingCommand,
  instances: runInstancesCommand,
};

async function helpOf(command: string): Promise<string> {
  let text = '';
  const io = { out: { write: (t: string) => (text += t) }, err: { write: (t: string) => (text += t) } };
  expect(await COMMANDS[command]!(['--help'], io), command).to.equal(0);
  return text;
}

describe('README: the CLI table', function () {
  it("names every option of every command's --help on that command's rows", async function () {
    const table = readFileSync(README, 'utf8')
      .split('\n')
      .filter((line) => line.startsWith('| `leadpost '))
      .map((line) => line.split(' | ')[0]!);
    const missing: string[] = [];
    for (const command of Object.keys(COMMANDS)) {
      const help = await helpOf(command);
      expect(help, command).to.match(new RegExp(`^usage: leadpost ${command}`));
      const options = new Set([...help.matchAll(/(?<![\w-])--[a-z][a-z-]*/g)].map(([option]) => option).filter((o) => o !== '--help'));
      expect(options.size, command).to.be.greaterThan(0);
      const rows = table.filter((cell) => cell.startsWith(`| \`leadpost ${command} `) || cell === `| \`leadpost ${command}\``).join(' ');
      missing.push(...[...options].filter((option) => !rows.includes(option)).map((option) => `leadpost ${command} ${option}`));
    }
    expect(missing).to.deep.equal([]);
  });
});
