import { loadRecordedConfig } from '../config.js';
import { PROJECTIONS, dropOlderVersions } from '../projections/index.js';
import { openReadModelStore } from '../read-models/index.js';
import type { ReadModelStore } from '../read-models/port.js';
import { refuseBesideOlderRelease } from '../roles/older-release.js';
import { PROJECTION_LEASES, PROJECTOR_LEASE } from '../roles/projector-leases.js';
import type { CliIo } from './io.js';
import { jsonOnly } from './usage.js';

// `leadpost prune-builds`: after an upgrade that changed projections' versions, the builds the
// older release served stay beside this release's, as large as them, until removed here once no
// instance of that release runs. Not automatic: an older instance serving only the API holds no
// lease, and only the operator knows that the last of them has stopped.

const USAGE = `usage: leadpost prune-builds [--json]

Once every instance of an older release has stopped (after an upgrade that changed a projection's
version): removes the read-model builds of older versions of each projection, which that release
served and this one never reads. This release's builds stay (the served one, and a replay's under
way), so the service may run meanwhile. Refused while a process of another release holds a
projector lease. On the embedded store the space goes to the file's free pages, which new writes
reuse. --json: {"removed":[collection…]}.`;

/** Projector leases held now of another version of a projection than this release's: a process of another release. */
async function otherReleaseLease(readModels: ReadModelStore): Promise<{ name: string; holder: string } | null> {
  const now = Date.now();
  const names = new Set(PROJECTIONS.map((projection) => projection.name));
  for (const lease of await readModels.leasesNamed(`${PROJECTOR_LEASE}-`)) {
    const versioned = /^projector-([a-z]+)-v\d+$/.exec(lease.name);
    if (versioned && names.has(versioned[1]!) && !PROJECTION_LEASES.includes(lease.name) && lease.expiresAt > now) return lease;
  }
  return null;
}

export async function runPruneBuildsCommand(args: string[], io: CliIo = { out: process.stdout, err: process.stderr }, env = process.env): Promise<number> {
  const read = jsonOnly(args, 'prune-builds', USAGE, io);
  if (typeof read === 'number') return read;
  const { json } = read;
  const readModels = await openReadModelStore(loadRecordedConfig(env));
  try {
    try {
      await refuseBesideOlderRelease(readModels);
      const other = await otherReleaseLease(readModels);
      if (other) throw new Error(`a process of another release of leadpost (${other.holder}) holds its lease ${other.name}: stop every instance of that release first`);
    } catch (error) {
      io.err.write(`leadpost prune-builds: ${(error as Error).message.replace(' before starting this one (README, "Upgrading")', ', then run this again')}\n`);
      return 1;
    }
    const removed = await dropOlderVersions(readModels);
    if (json) io.out.write(`${JSON.stringify({ removed })}\n`);
    else io.out.write(removed.length === 0 ? 'no build of an older version to remove\n' : `removed ${removed.length} builds of older versions: ${removed.join(', ')}\n`);
    return 0;
  } finally {
    await readModels.close();
  }
}
