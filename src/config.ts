import { resolve } from 'node:path';

// Every setting comes from the environment, the same for `leadpost serve` and every CLI command,
// so a command run beside the service opens the very stores the service uses.
export interface Config {
  readonly dataDir: string;
  readonly eventStoreUrl: string | undefined;
  readonly mongoUrl: string | undefined;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  return {
    dataDir: resolve(env.LEADPOST_DATA_DIR || './data'),
    eventStoreUrl: env.EVENTSTORE_URL || undefined,
    mongoUrl: env.MONGODB_URL || undefined,
  };
}
