import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { runBackupCommand } from '../src/cli/backup.js';
import { openEventStore } from '../src/event-store/index.js';
import { PROJECTIONS } from '../src/projections/projections.js';
import { REBUILD_STORE_OPTIONS, rebuildProjections } from '../src/projections/rebuild.js';
import { EmbeddedReadModelStore } from '../src/read-models/embedded.js';
import { seedLeads } from '../test/support/seed-leads.js';
import { tempDir } from '../test/support/tmp.js';
import { round } from './stats.js';

export interface BackupResult {
  readonly events: number;
  readonly leads: number;
  /** The data dir's files (the WAL files included) before the backup. */
  readonly dataDirMb: number;
  /** The copy: VACUUM INTO writes each store without its free pages or WAL. */
  readonly backupMb: number;
  readonly seconds: number;
  /** This process's CPU over the backup (it runs in process, as `leadpost backup` runs alone). */
  readonly cpuSeconds: number;
}

const mb = (dir: string) => round(readdirSync(dir).reduce((sum, file) => sum + statSync(join(dir, file)).size, 0) / 1e6);

/**
 * A data dir of about `events` lead events (the realistic mix: deliveries, feedback, returns) with
 * its read models built, copied by `leadpost backup`.
 */
export async function benchBackup(events: number): Promise<BackupResult> {
  const dir = tempDir('bench-backup');
  const copies = tempDir('bench-backup-copy');
  try {
    const store = await openEventStore({ dataDir: dir.path });
    const readModels = EmbeddedReadModelStore.open(dir.path, REBUILD_STORE_OPTIONS);
    let seeded;
    try {
      seeded = await seedLeads(store, { events, afterSale: true, viaCodec: true });
      await rebuildProjections(store, readModels, PROJECTIONS, { build: () => 'bench' });
    } finally {
      await readModels.close();
      await store.close();
    }
    const dataDirMb = mb(dir.path);
    const target = join(copies.path, 'copy');
    const output: string[] = [];
    const io = { out: { write: (text: string) => output.push(text) }, err: { write: (text: string) => output.push(text) } };
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const code = await runBackupCommand(['--to', target], io, { LEADPOST_DATA_DIR: dir.path });
    const seconds = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    if (code !== 0) throw new Error(`leadpost backup failed: ${output.join('')}`);
    return {
      events: seeded.events,
      leads: seeded.leads,
      dataDirMb,
      backupMb: mb(target),
      seconds: round(seconds),
      cpuSeconds: round((cpu.user + cpu.system) / 1e6),
    };
  } finally {
    dir.remove();
    copies.remove();
  }
}
