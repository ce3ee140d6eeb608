// The steps that must run with every instance stopped (`seal-clear-leads`, `master-key rotate`)
// take the service's leases for their whole run: a service that starts meanwhile stands by, one
// already running holds them, and the step refuses. An `--roles api` instance holds none of them,
// but every instance keeps one of its own (INSTANCE_LEASE_PREFIX), which is looked for too.

import type { ReadModelStore } from '../read-models/port.js';
import { INSTANCE_LEASE_PREFIX, LeaseKeeper, leaseHolderId } from '../roles/lease-keeper.js';
import { OLDER_PROJECTOR_LEASES, PROJECTION_LEASES } from '../roles/projector-leases.js';

/**
 * The leases a running service holds: while a command holds them, no projection, delivery worker
 * or retention sweep runs. Then the projector leases of older releases (one per projection, then
 * the single one), so that none of theirs runs either: last, since a release of the per-projection
 * leases that sees the single one held gives its projections up.
 */
const LEASES = [...PROJECTION_LEASES, 'delivery', 'retention', ...OLDER_PROJECTOR_LEASES] as const;
/** How long a lease held by another is waited for: a lease's time (3 s) and a beat. */
const LEASE_WAIT_MS = 4500;

export interface HeldLeases {
  /** Who holds a lease this command could not take (a running service), or null when it holds them all. */
  readonly heldBy: string | null;
  /**
   * Throws `whileWhat` when another holder took a lease since (a service started): a step that holds
   * the event loop (a VACUUM) may let this command's leases run out, so only another holder counts.
   */
  stillHeld(whileWhat: (holder: string, lease: string) => string): Promise<void>;
}

/** Takes every lease, keeping them until `closers` run; a holder that died is waited out, as a standby would. */
export async function holdServiceLeases(readModels: ReadModelStore, closers: Array<() => Promise<void>>): Promise<HeldLeases> {
  const holder = leaseHolderId();
  const stillHeld = async (whileWhat: (holder: string, lease: string) => string) => {
    for (const name of LEASES) {
      const lease = await readModels.lease(name);
      if (lease && lease.holder !== holder && lease.expiresAt > Date.now()) throw new Error(whileWhat(lease.holder, name));
    }
    const started = (await readModels.leasesNamed(INSTANCE_LEASE_PREFIX)).find((lease) => lease.expiresAt > Date.now());
    if (started) throw new Error(whileWhat(started.holder, 'instance'));
  };
  for (const name of LEASES) {
    const keeper = new LeaseKeeper({ leases: readModels, name, holder, work: { start: async () => {}, stop: async () => {} } });
    closers.unshift(() => keeper.stop());
    await keeper.start();
    const until = Date.now() + LEASE_WAIT_MS;
    while (!keeper.status().held && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 50));
    const status = keeper.status();
    if (!status.held) return { heldBy: `${status.holder ?? 'another process'} holds the ${status.lease} lease`, stillHeld };
  }
  // An instance that died keeps its lease until it runs out: waited out, as the role leases are.
  const until = Date.now() + LEASE_WAIT_MS;
  for (;;) {
    const running = (await readModels.leasesNamed(INSTANCE_LEASE_PREFIX)).find((lease) => lease.expiresAt > Date.now());
    if (!running) return { heldBy: null, stillHeld };
    if (Date.now() >= until) return { heldBy: `instance ${running.holder} is running`, stillHeld };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
