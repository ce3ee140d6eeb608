// `leadpost instances`: the instances running on this data dir (or these servers), from the lease
// each keeps while it runs (INSTANCE_LEASE_PREFIX), with the role leases each holds: which ones a
// SIGHUP or a rolling restart must reach, and whether a step that needs every instance stopped
// (`seal-clear-leads`, `master-key rotate`) can run.

import { loadRecordedConfig } from '../config.js';
import { openReadModelStore } from '../read-models/index.js';
import { INSTANCE_LEASE_PREFIX } from '../roles/lease-keeper.js';
import { OLDER_PROJECTOR_LEASES, PROJECTION_LEASES } from '../roles/projector-leases.js';
import type { CliIo } from './io.js';
import { UsageError, readArgs } from './usage.js';

const USAGE = `usage: leadpost instances [--json]

Lists the instances of leadpost serve running on this data dir (or on the EVENTSTORE_URL and
MONGODB_URL servers): each keeps a lease in the read-model store while it runs, renewed every
second, given up when it stops and run out 3 s after it dies. For each, its holder id
(HOST:PID:NONCE), then who holds each role lease (one per projection: projector-leads-v4,
projector-deliveries-v3, projector-feedback-v1, projector-reports-v4; delivery, retention; held
under the holder id of the instance, except by a background thread started anew after a failure,
which holds them under a new id with its process's HOST:PID), and a projector lease of an older
release (projector-leads …, projector) marked so. --json: one line,
{"instances":[holder…],"leases":[{"name","holder"}…]}.`;

/** The leases only one instance holds at a time (see roles/), then those of older releases' projectors. */
const ROLE_LEASES = [...PROJECTION_LEASES, 'delivery', 'retention', ...OLDER_PROJECTOR_LEASES] as const;

const ROLE_LEASE_WIDTH = Math.max(...ROLE_LEASES.map((name) => name.length)) + 1;

export async function runInstancesCommand(args: string[], io: CliIo = { out: process.stdout, err: process.stderr }, env = process.env): Promise<number> {
  let values;
  try {
    ({ values } = readArgs(args, { json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } }));
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.err.write(`leadpost instances: ${error.message}\n\n${USAGE}\n`);
    return 2;
  }
  if (values.help) {
    io.out.write(`${USAGE}\n`);
    return 0;
  }
  const readModels = await openReadModelStore(loadRecordedConfig(env));
  try {
    const now = Date.now();
    const instances = (await readModels.leasesNamed(INSTANCE_LEASE_PREFIX)).filter((lease) => lease.expiresAt > now).map((lease) => lease.holder).sort();
    // Held under holder ids of their own (a background thread has one): HOST:PID says which process.
    const leases = (await Promise.all(ROLE_LEASES.map((name) => readModels.lease(name))))
      .filter((lease) => lease !== null && lease.expiresAt > now)
      .map((lease) => ({ name: lease!.name, holder: lease!.holder }));
    if (values.json) {
      io.out.write(`${JSON.stringify({ instances, leases })}\n`);
    } else {
      io.out.write(instances.length === 0 ? 'no instance is running\n' : `instances running (${instances.length}):\n${instances.map((holder) => `  ${holder}\n`).join('')}`);
      // A step of this release that needs every instance stopped holds the older leases beside its own.
      const ours = new Set(leases.filter((lease) => PROJECTION_LEASES.includes(lease.name)).map((lease) => lease.holder));
      if (leases.length > 0) io.out.write(`role leases held:\n${leases.map(({ name, holder }) => `  ${name.padEnd(ROLE_LEASE_WIDTH)} ${holder}${OLDER_PROJECTOR_LEASES.includes(name) && !ours.has(holder) ? ' (an older release)' : ''}\n`).join('')}`);
    }
    return 0;
  } finally {
    await readModels.close();
  }
}
