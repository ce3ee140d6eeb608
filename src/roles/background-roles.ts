import type { Logger } from 'pino';
import { RetentionSweeper } from '../commands/retention.js';
import type { BuyerRequestKind } from '../delivery/buyer-agent.js';
import type { AttemptReport } from '../delivery/deliver-lead.js';
import { DeliveryWorker } from '../delivery/webhook-worker.js';
import type { EventStore } from '../event-store/port.js';
import type { PersonalDataKeys } from '../personal-data/index.js';
import type { Projections } from '../projections/index.js';
import type { ReadModelStore } from '../read-models/port.js';
import type { LoadedRoutingConfig } from '../routing/load-config.js';
import { LeaseKeeper, type LeaseStatus } from './lease-keeper.js';
import { ProjectorLeases } from './projector-leases.js';

// The work of a `serve` process that is not answering requests: the projections (each while this
// process holds its lease, balanced over the projector processes: projector-leases.ts), the webhook
// delivery worker and the retention sweep, each run only while this process holds its lease. The
// same code runs them on the main thread of a process, or on the background thread an API process
// gives them (background-thread.ts).

export interface BackgroundRolesDeps {
  readonly projector: boolean;
  readonly delivery: boolean;
  /** PII_RETENTION_DAYS; the sweep runs beside the projector, null: never. */
  readonly piiRetentionDays: number | null;
  readonly store: EventStore;
  readonly personalData: PersonalDataKeys;
  readonly readModels: ReadModelStore;
  readonly projections: Projections;
  readonly routing: () => LoadedRoutingConfig;
  readonly now: () => Date;
  readonly logger: Logger;
  /** This process's name in the leases it holds. */
  readonly holder: string;
  readonly onAttempt?: (leadId: number, report: AttemptReport) => void;
  /** See DeliveryWorkerDeps.countSentAgain. */
  readonly countSentAgain?: (kind: BuyerRequestKind) => void;
  /** A CA trusted on top of the system ones when posting to webhook buyers (a test's self-signed buyer). */
  readonly buyerCa?: string;
}

export class BackgroundRoles {
  readonly retention: RetentionSweeper | null;
  private readonly projector: ProjectorLeases | null;
  private readonly delivery: LeaseKeeper | null;
  private readonly retentionLease: LeaseKeeper | null;
  private worker: DeliveryWorker | null = null;

  constructor(private readonly deps: BackgroundRolesDeps) {
    const { projections, readModels, holder, logger } = deps;
    const keeper = (name: string, work: ConstructorParameters<typeof LeaseKeeper>[0]['work']) => new LeaseKeeper({ leases: readModels, name, holder, logger, work });
    this.projector = deps.projector ? new ProjectorLeases({ leases: readModels, holder, projections, logger }) : null;
    // The worker runs only while this process holds the delivery lease: a new one each time it takes it.
    this.delivery = deps.delivery
      ? keeper('delivery', {
          start: async () => {
            this.worker = this.newWorker();
            this.worker.start();
          },
          stop: async () => {
            const stopping = this.worker;
            this.worker = null;
            await stopping?.stop();
          },
        })
      : null;
    // Retention shreds in one process at a time: the one holding its lease, among those that project.
    this.retention =
      deps.piiRetentionDays === null || !deps.projector
        ? null
        : new RetentionSweeper({
            store: deps.store,
            readModels,
            leads: () => projections.collection('leads'),
            keys: deps.personalData,
            days: deps.piiRetentionDays,
            now: deps.now,
            logger: logger.child({ component: 'retention' }),
          });
    const retention = this.retention;
    this.retentionLease = retention ? keeper('retention', { start: async () => retention.start(), stop: () => retention.stop() }) : null;
    // A sale reaches the deliveries read model within milliseconds: look then, not at the next poll.
    projections.onCommit((name) => name === 'deliveries' && this.worker?.wake());
  }

  /** This process's name in the leases. */
  get holder(): string {
    return this.deps.holder;
  }

  /** The leases kept here, as this process sees them now. */
  leases(): LeaseStatus[] {
    return [...(this.projector?.statuses() ?? []), ...[this.delivery, this.retentionLease].filter((keeper) => keeper !== null).map((keeper) => keeper.status())];
  }

  /** Free projection leases are taken at the first beat: a single instance answers from running projections at once. */
  async startProjector(): Promise<void> {
    await this.projector?.start();
  }

  /** Started after the listeners, so that a failed start leaves no worker running. */
  async startDeliveryAndRetention(): Promise<void> {
    await this.delivery?.start();
    await this.retentionLease?.start();
  }

  /** Attempts and shreds in flight land before the stores close. */
  async stopDeliveryAndRetention(): Promise<void> {
    await Promise.all([this.delivery?.stop(), this.retentionLease?.stop()]);
  }

  async stopProjector(): Promise<void> {
    await this.projector?.stop();
  }

  private newWorker(): DeliveryWorker {
    const { store, personalData, readModels, projections, routing, now, logger, onAttempt, countSentAgain, buyerCa } = this.deps;
    return new DeliveryWorker({
      events: store,
      personalData,
      readModels,
      deliveries: () => projections.collection('deliveries'),
      routing,
      env: process.env,
      now,
      logger: logger.child({ component: 'delivery' }),
      ...(onAttempt ? { onAttempt } : {}),
      ...(countSentAgain ? { countSentAgain } : {}),
      ...(buyerCa ? { ca: buyerCa } : {}),
    });
  }
}
