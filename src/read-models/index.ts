import type { Config } from '../config.js';
import type { EmbeddedReadModelOptions } from './embedded.js';
import type { ReadModelStore } from './port.js';

export * from './port.js';

/**
 * The read-model store the configuration selects. The MongoDB driver is loaded only when it is used;
 * `options` apply to the embedded store (see EmbeddedReadModelOptions).
 */
export async function openReadModelStore(
  config: Pick<Config, 'dataDir' | 'mongoUrl'>,
  options: Pick<EmbeddedReadModelOptions, 'cacheMiB' | 'commitThread' | 'othersMayWrite' | 'smallThreadHeap' | 'readerThread'> = {},
): Promise<ReadModelStore> {
  if (config.mongoUrl) {
    const { MongoReadModelStore } = await import('./mongodb.js');
    return MongoReadModelStore.connect(config.mongoUrl);
  }
  const { EmbeddedReadModelStore } = await import('./embedded.js');
  return EmbeddedReadModelStore.open(config.dataDir, options);
}
