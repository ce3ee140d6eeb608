import type { Logger } from 'pino';
import type { EventStore } from '../event-store/port.js';
import type { PersonalDataKeys } from '../personal-data/data-keys.js';
import type { ReadModelStore } from '../read-models/port.js';
import { shredLeads } from './erasure.js';

// Retention: a consumer's personal data is kept no longer than PII_RETENTION_DAYS. In the
// background, the leads received before that many days ago lose their data keys and record
// LeadPersonalDataExpired (the same scrub as an erasure: the read models drop their copy, a
// pending delivery is cancelled); outcomes and reports stay. Each lead is shredded once, and a
// second instance sweeping at the same time records nothing twice (the lead's stream decides).

export interface RetentionDeps {
  readonly store: EventStore;
  readonly keys: PersonalDataKeys;
  readonly readModels: ReadModelStore;
  /** The leads collection being served. */
  readonly leads: () => string;
  readonly days: number;
  readonly now: () => Date;
  readonly logger?: Logger;
  /** Between sweeps; defaults to an hour. */
  readonly intervalMs?: number;
}

const DAY_MS = 86_400_000;
const PAGE = 500;

export class RetentionSweeper {
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<number> | null = null;
  /** Where the last sweep stopped: leads before it were shredded already (or had nothing to shred). */
  private resumeAfter: { value: string; id: string } | undefined;

  constructor(private readonly deps: RetentionDeps) {}

  start(): void {
    const tick = () => {
      void this.sweep()
        .catch((error: unknown) => this.deps.logger?.warn({ err: error }, 'retention sweep failed'))
        .finally(() => {
          if (this.timer) this.timer = setTimeout(tick, this.deps.intervalMs ?? 3_600_000).unref();
        });
    };
    this.timer = setTimeout(tick, 0).unref();
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.sweeping?.catch(() => 0);
  }

  /** Shreds every lead older than the retention period; resolves to how many it shredded now. */
  sweep(): Promise<number> {
    this.sweeping ??= this.sweepOnce().finally(() => (this.sweeping = null));
    return this.sweeping;
  }

  private async sweepOnce(): Promise<number> {
    const now = this.deps.now();
    const cutoff = new Date(now.getTime() - this.deps.days * DAY_MS).toISOString();
    let shredded = 0;
    let after = this.resumeAfter;
    for (;;) {
      const docs = await this.deps.readModels.find(this.deps.leads(), {
        filter: { received_at: { $lt: cutoff } },
        sort: { field: 'received_at', direction: 'asc' },
        ...(after ? { after } : {}),
        limit: PAGE,
      });
      // A lead with no personal data (rejected INVALID, or already erased) has nothing to shred.
      const due = docs.filter((doc) => doc.erased !== true && doc.lead !== null).map((doc) => Number(doc._id));
      shredded += (await shredLeads(this.deps.store, this.deps.keys, due, { type: 'Expire', retentionDays: this.deps.days, now }, { causationId: 'retention' })).marked.length;
      const last = docs.at(-1);
      if (last) after = { value: String(last.received_at), id: last._id };
      if (docs.length < PAGE) break;
    }
    this.resumeAfter = after;
    if (shredded > 0) this.deps.logger?.info({ leads: shredded, retention_days: this.deps.days }, 'personal data past retention shredded');
    return shredded;
  }
}
