import type { Config } from '../config.js';
import type { ReadModelStore } from './port.js';

export * from './port.js';

/**
 * The read-model store the configuration selects. The MongoDB driver is loaded only when it is used.
 * `cacheMiB`: the embedded store's page cache (better-sqlite3's default, 16 MiB, when not given).
 */
export async function openReadModelStore(config: Pick<Config, 'dataDir' | 'mongoUrl'>, options: { cacheMiB?: number } = {}): Promise<ReadModelStore> {
  if (config.mongoUrl) {
    const { MongoReadModelStore } = await import('./mongodb.js');
    return MongoReadModelStore.connect(config.mongoUrl);
  }
  const { EmbeddedReadModelStore } = await import('./embedded.js');
  return EmbeddedReadModelStore.open(config.dataDir, options);
}
