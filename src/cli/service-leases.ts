// The steps that must run with every instance stopped (`seal-clear-leads`, `master-key rotate`)
// take the service's leases for their whole run: a service that starts meanwhile stands by, one
// already running holds them, and the step refuses. An `--roles api` instance holds none, which
// is why their READMEs say to stop every instance.

import type { ReadModelStore } from '../read-models/port.js';
import { LeaseKeeper, leaseHolderId } from '../roles/lease-keeper.js';

/** The leases a running service holds: while a command holds them, no projector, delivery worker or retention sweep runs. */
const LEASES = ['projector', 'delivery', 'retention'] as const;
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
  return { heldBy: null, stillHeld };
}
