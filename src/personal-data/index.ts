import { join } from 'node:path';
import { PersonalDataKeys } from './data-keys.js';
import { KEYS_FILE } from './embedded-key-store.js';
import type { DataKeyStore } from './key-store.js';
import { MASTER_KEY_FILE, loadOrCreateMasterKey } from './master-key.js';
import { type KeyStoreWatch, watchedKeyStore } from './watched-key-store.js';

export { PersonalDataKeys, UnknownDataKeyError } from './data-keys.js';
export { MasterKeyError } from './master-key.js';

export interface PersonalDataConfig {
  readonly dataDir: string;
  /** With MONGODB_URL the key store is a MongoDB collection, else keys.db in the data dir. */
  readonly mongoUrl?: string | undefined;
  /** LEADPOST_MASTER_KEY_FILE; master.key in the data dir when unset. */
  readonly masterKeyFile?: string | undefined;
}

/** The master key file the configuration names. */
const masterKeyPath = (config: PersonalDataConfig): string => config.masterKeyFile ?? join(config.dataDir, MASTER_KEY_FILE);

/**
 * The data keys of personal data: the master key (made on the first start) and the key store the
 * configuration selects. The MongoDB driver is loaded only when it is used. `watch` is told how each
 * use of the key store ended (see watchedKeyStore).
 */
export async function openPersonalDataKeys(config: PersonalDataConfig, watch?: KeyStoreWatch): Promise<PersonalDataKeys> {
  // With keys.db already in the data dir, the master key is one to be found, not made.
  const file = masterKeyPath(config);
  const masterKey = await loadOrCreateMasterKey(file, config.mongoUrl ? undefined : join(config.dataDir, KEYS_FILE));
  const store = await openKeyStore(config);
  return new PersonalDataKeys(watch ? watchedKeyStore(store, watch) : store, masterKey, { masterKeyFile: file });
}

/** The key store the configuration selects, alone: for a command that works on the wrapped keys (a master key rotation). */
export async function openKeyStore(config: PersonalDataConfig): Promise<DataKeyStore> {
  if (config.mongoUrl) {
    const { MongoKeyStore } = await import('./mongodb-key-store.js');
    return MongoKeyStore.connect(config.mongoUrl);
  }
  const { EmbeddedKeyStore } = await import('./embedded-key-store.js');
  return EmbeddedKeyStore.open(config.dataDir);
}
