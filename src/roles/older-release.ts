import type { Lease, ReadModelStore } from '../read-models/port.js';
import { OLDER_PROJECTOR_LEASES, PROJECTION_LEASES } from './projector-leases.js';

// Releases whose projector leases name no version cannot serve beside this one: they look for
// contact and Idempotency-Key claims only under the plain names they wrote (or compare a retried
// body by its plain hash), so a consumer this release accepted would be sold again through them,
// and a retry answered here refused there. A process of such a release is seen by the lease it
// holds; one serving only the API holds none and is the operator's to stop (README, "Upgrading").

/** Longer than a lease lives unrenewed (3 s) and a beat: a lease still held after it is renewed by a live process. */
const RENEWED_WITHIN_MS = 4500;

/** Refuses to start while a live process of an older release holds one of its projector leases here. */
export async function refuseBesideOlderRelease(leases: Pick<ReadModelStore, 'lease'>): Promise<void> {
  const live = async (name: string): Promise<Lease | null> => {
    const lease = await leases.lease(name);
    return lease && lease.expiresAt > Date.now() ? lease : null;
  };
  // A step of this release that needs every instance stopped holds the older leases too, beside its own.
  const ours = new Set<string>();
  for (const name of PROJECTION_LEASES) {
    const lease = await live(name);
    if (lease) ours.add(lease.holder);
  }
  for (const name of OLDER_PROJECTOR_LEASES) {
    let lease = await live(name);
    if (!lease || ours.has(lease.holder)) continue;
    // One that is about to run out may be a process just stopped or killed (an upgrade in place):
    // only a renewal says it lives.
    if (lease.expiresAt - Date.now() <= RENEWED_WITHIN_MS) {
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, lease!.expiresAt - Date.now()) + 100));
      lease = await live(name);
      if (!lease) continue;
    }
    throw new Error(
      `a process of an older release of leadpost (${lease.holder}) holds its lease ${name} on these stores: stop every instance of that release before starting this one (README, "Upgrading")`,
    );
  }
}
