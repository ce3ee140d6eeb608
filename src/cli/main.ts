import { loadConfig } from '../config.js';
import { openEventStore } from '../event-store/index.js';

const USAGE = `usage: leadpost <command>

commands:
  serve     run the service (what \`npm start\` runs)

Every command reads the same environment as the service: LEADPOST_DATA_DIR, EVENTSTORE_URL, MONGODB_URL.`;

/** Runs one CLI command; resolves to the process exit code. */
export async function main(args: string[]): Promise<number> {
  const [command] = args;
  switch (command) {
    case 'serve':
      return serve();
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      console.log(USAGE);
      return command === undefined ? 1 : 0;
    default:
      console.error(`leadpost: unknown command '${command}'\n\n${USAGE}`);
      return 1;
  }
}

async function serve(): Promise<number> {
  const config = loadConfig();
  const store = await openEventStore(config);
  console.log(JSON.stringify({ msg: 'leadpost started', store: config.eventStoreUrl ? 'eventstoredb' : 'embedded', dataDir: config.dataDir }));
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await store.close();
  return 0;
}
