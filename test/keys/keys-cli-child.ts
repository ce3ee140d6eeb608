// Runs `leadpost keys …` in its own process, as an operator would beside the running service.
import { runKeysCommand } from '../../src/cli/keys.js';

const code = await runKeysCommand(process.argv.slice(2));
// Exit only once the output has left, so the parent always sees the whole of it.
process.stdout.write('', () => process.exit(code));
