// The read models a one-off command reads (`leadpost erase`, `deliveries redeliver --buyer`),
// brought up to date by the command's own process.

import type { EventStore } from '../event-store/port.js';
import { Projections } from '../projections/index.js';
import type { ReadModelStore } from '../read-models/port.js';
import { leaseHolderId } from '../roles/lease-keeper.js';
import { ProjectorLeases } from '../roles/projector-leases.js';

/**
 * The projections, started. Alone, the command runs them itself (holding their leases, as a
 * service would, without joining the services' share of them); beside a running service it
 * follows the checkpoints of the instances that hold them. What it opens is put first in `closers`.
 */
export async function commandProjections(store: EventStore, readModels: ReadModelStore, closers: Array<() => Promise<void>>): Promise<Projections> {
  const projections = new Projections(store, readModels);
  await projections.start();
  closers.unshift(() => projections.stop());
  const projector = new ProjectorLeases({ leases: readModels, holder: leaseHolderId(), projections, join: false });
  await projector.start();
  closers.unshift(() => projector.stop());
  return projections;
}
