import type { PersonalDataKeys } from '../personal-data/index.js';
import { rootCertificates } from 'node:tls';
import { Agent } from 'node:https';
import type { Logger } from 'pino';
import type { EventStore } from '../event-store/port.js';
import type { ReadModelStore } from '../read-models/port.js';
import type { LoadedRoutingConfig } from '../routing/load-config.js';
import { backoffMs } from './backoff.js';
import { type AttemptReport, deliverLead } from './deliver-lead.js';
import { sendErasureNotice } from './erasure-notice.js';

// The webhook delivery worker inside `leadpost serve`. It finds due deliveries in the
// `deliveries` read model and makes one attempt per lead at a time; the lead's stream, not the
// read model, decides whether an attempt is made (see attempt.ts), so a lagging read model or a
// second instance polling the same rows costs a read, never a second delivery.

export interface DeliveryWorkerDeps {
  readonly events: EventStore;
  /** Opens each lead's personal fields for its buyer's payload. */
  readonly personalData: PersonalDataKeys;
  readonly readModels: ReadModelStore;
  /** The physical name of the deliveries collection being served. */
  readonly deliveries: () => string;
  readonly routing: () => LoadedRoutingConfig;
  /** Where `secret_env` is looked up; defaults to process.env. */
  readonly env?: NodeJS.ProcessEnv;
  readonly now?: () => Date;
  readonly logger?: Logger;
  /** Defaults to 200. */
  readonly pollMs?: number;
  /** Attempts in flight at once; defaults to 16. */
  readonly concurrency?: number;
  /** A CA trusted on top of the system ones (a test's self-signed buyer). */
  readonly ca?: string | Buffer;
  /** Wait before retrying after failed attempt n; defaults to backoffMs. */
  readonly backoff?: (attempt: number) => number;
  /** See LOST_AFTER_MS. */
  readonly lostAfterMs?: number;
  /** Called after each attempt; for tests and metrics. */
  readonly onAttempt?: (leadId: number, report: AttemptReport) => void;
}

const BATCH = 100;
/** Long enough for the read model to catch up with a settled delivery, by a wide margin. */
const SETTLED_HOLD_MS = 60_000;

export class DeliveryWorker {
  private readonly agent: Agent;
  private readonly inFlight = new Map<number, Promise<void>>();
  private readonly noticing = new Map<number, Promise<void>>();
  /**
   * Leads this worker just settled or rescheduled, with the time to look at them again. The read
   * model shows an outcome a few ms after it is recorded; meanwhile the oldest due rows are the
   * ones just delivered, and re-reading them would take the slots of leads still waiting.
   */
  private readonly held = new Map<number, number>();
  private running = false;
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  /** A wake() came during a tick: poll again right after it. */
  private again = false;
  /** More was due than there were slots: poll again as soon as one frees. */
  private backlog = false;

  constructor(private readonly deps: DeliveryWorkerDeps) {
    const concurrency = deps.concurrency ?? 16;
    this.agent = new Agent({ keepAlive: true, maxSockets: concurrency, ...(deps.ca ? { ca: [...rootCertificates, deps.ca] } : {}) });
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.schedule(0);
  }

  /** Stops polling and waits for the attempts in flight to be recorded. */
  async stop(): Promise<void> {
    this.running = false;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.ticking;
    await Promise.all([...this.inFlight.values(), ...this.noticing.values()]);
    this.agent.destroy();
  }

  /** Polls now instead of at the next interval, e.g. once the deliveries read model has a new sale. */
  wake(): void {
    if (!this.running) return;
    if (this.ticking) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    this.schedule(0);
  }

  private schedule(delayMs: number): void {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.ticking = this.tick()
        .catch((error: unknown) => this.deps.logger?.warn({ err: error }, 'delivery poll failed'))
        .finally(() => {
          this.ticking = undefined;
          if (!this.running) return;
          const soon = this.again;
          this.again = false;
          this.schedule(soon ? 0 : (this.deps.pollMs ?? 200));
        });
    }, delayMs);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    const capacity = (this.deps.concurrency ?? 16) - this.inFlight.size;
    if (capacity <= 0) {
      this.backlog = true;
      return;
    }
    const routing = this.deps.routing();
    const webhookBuyers = routing.buyers.filter((b) => b.delivery.kind === 'webhook').map((b) => b.id);
    if (webhookBuyers.length === 0) return;
    const now = this.now();
    // Filtered on the buyer in the query: pull buyers' rows stay pending for good and would
    // otherwise fill every batch ahead of the webhook ones.
    const due = await this.deps.readModels.find(this.deps.deliveries(), {
      filter: { status: 'pending', next_attempt_at: { $lte: now.toISOString() }, buyer: { $in: webhookBuyers } },
      sort: { field: 'next_attempt_at', direction: 'asc' },
      limit: BATCH,
    });
    if (!this.running) return;
    const nowMs = now.getTime();
    for (const [leadId, until] of this.held) if (until <= nowMs) this.held.delete(leadId);
    let started = 0;
    await this.notices(webhookBuyers, now, routing);
    for (const row of due) {
      const leadId = row.lead_id;
      if (typeof leadId !== 'number' || this.inFlight.has(leadId) || this.held.has(leadId)) continue;
      if (started === capacity) {
        this.backlog = true;
        break;
      }
      started += 1;
      this.attempt(leadId, routing);
    }
  }

  /** The `lead.erased` notices due now, one at a time per lead, in the slots deliveries leave. */
  private async notices(webhookBuyers: string[], now: Date, routing: LoadedRoutingConfig): Promise<void> {
    const due = await this.deps.readModels.find(this.deps.deliveries(), {
      filter: { notice: 'pending', notice_next_at: { $lte: now.toISOString() }, buyer: { $in: webhookBuyers } },
      sort: { field: 'notice_next_at', direction: 'asc' },
      limit: BATCH,
    });
    for (const row of due) {
      const leadId = row.lead_id;
      if (!this.running || typeof leadId !== 'number' || this.noticing.has(leadId)) continue;
      const run = sendErasureNotice(
        this.sendDeps(routing),
        leadId,
      )
        .then((outcome) => this.deps.logger?.info({ lead_id: leadId, outcome }, 'lead.erased notice'))
        .catch((error: unknown) => this.deps.logger?.warn({ err: error, lead_id: leadId }, 'lead.erased notice failed to run'))
        .finally(() => this.noticing.delete(leadId));
      this.noticing.set(leadId, run);
    }
  }

  /** What sending a lead or an erasure notice to a buyer needs, with the routing file of this poll. */
  private sendDeps(routing: LoadedRoutingConfig) {
    return {
      events: this.deps.events,
      buyer: (id: string) => routing.buyers.find((b) => b.id === id),
      env: this.deps.env ?? process.env,
      now: () => this.now(),
      backoff: this.deps.backoff ?? backoffMs,
      agent: this.agent,
    };
  }

  private attempt(leadId: number, routing: LoadedRoutingConfig): void {
    const run = deliverLead(
      { ...this.sendDeps(routing), personalData: this.deps.personalData, lostAfterMs: this.deps.lostAfterMs, logger: this.deps.logger },
      leadId,
    )
      .then((report) => {
        this.hold(leadId, report);
        this.deps.onAttempt?.(leadId, report);
      })
      .catch((error: unknown) => this.deps.logger?.warn({ err: error, lead_id: leadId }, 'delivery attempt failed to run'))
      .finally(() => {
        this.inFlight.delete(leadId);
        if (this.backlog) {
          this.backlog = false;
          this.wake();
        }
      });
    this.inFlight.set(leadId, run);
  }

  private hold(leadId: number, report: AttemptReport): void {
    const settledUntil = this.now().getTime() + SETTLED_HOLD_MS;
    if (report.kind === 'recorded') this.held.set(leadId, report.retryAt === null ? settledUntil : Date.parse(report.retryAt));
    if (report.kind === 'skipped' && (report.reason === 'delivered' || report.reason === 'failed' || report.reason === 'cancelled')) this.held.set(leadId, settledUntil);
  }

  private now(): Date {
    return this.deps.now?.() ?? new Date();
  }
}
