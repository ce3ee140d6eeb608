import type { PersonalDataKeys } from '../personal-data/index.js';
import { type OutageLog, repeatedFailures } from '../ops/outage-log.js';
import { type BuyerConnections, type BuyerRequestKind, buyerAgent } from './buyer-agent.js';
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
  /** Attempts in flight at once, over all buyers; defaults to 64. */
  readonly concurrency?: number;
  /** Attempts in flight at once to one buyer; defaults to 16 (at most `concurrency`). */
  readonly perBuyer?: number;
  /** A CA trusted on top of the system ones (a test's self-signed buyer). */
  readonly ca?: string | Buffer;
  /** Wait before retrying after failed attempt n; defaults to backoffMs. */
  readonly backoff?: (attempt: number) => number;
  /** See LOST_AFTER_MS. */
  readonly lostAfterMs?: number;
  /** Called after each attempt; for tests and metrics. */
  readonly onAttempt?: (leadId: number, report: AttemptReport) => void;
  /** Called for every POST sent once more after a stale connection (buyer-agent.ts); for metrics. */
  readonly countSentAgain?: (kind: BuyerRequestKind) => void;
  /** How long stop() lets the POSTs in flight run before it cuts them short (default 3 s). */
  readonly stopGraceMs?: number;
}

const BATCH = 100;
const DEFAULT_CONCURRENCY = 64;
/** As many as the worker had in all before buyers had shares: one healthy buyer drains as fast as then. */
const DEFAULT_PER_BUYER = 16;
/** How long a notice that could not run to its record is left alone: at first, and at the most. */
const NOTICE_HOLD_MIN_MS = 1_000;
const NOTICE_HOLD_MAX_MS = 60_000;
/** How long stop() lets POSTs in flight run: the service's shutdown budget is 10 s in all. */
const STOP_GRACE_MS = 3_000;
/** Connections to one buyer for `lead.erased` notices, beside the deliveries' own. */
const NOTICE_SOCKETS = 4;
/** Long enough for the read model to catch up with a settled delivery, by a wide margin. */
const SETTLED_HOLD_MS = 60_000;

/** Skip reasons after which a lead needs nothing more from this worker. */
const SETTLED = new Set(['delivered', 'failed', 'cancelled', 'test_lead']);

type Cursor = { readonly value: string; readonly id: string };

export class DeliveryWorker {
  private readonly agent: BuyerConnections;
  private readonly noticeAgent: BuyerConnections;
  /**
   * One per attempt and per notice in flight, each aborted when stop() has waited long enough for
   * the POSTs in flight. Not one signal for the worker: every request in flight adds an abort
   * listener to its signal until it ends, and 16 attempts beside a page of notices made Node warn
   * of a leak (MaxListenersExceededWarning, on stderr) on a signal shared by all of them.
   */
  private readonly cutters = new Set<AbortController>();
  /** stop() has cut the POSTs in flight short: an attempt that reaches its POST after that sends none. */
  private cut = false;
  private readonly concurrency: number;
  /**
   * A buyer's share of the slots: a buyer whose endpoint hangs until each attempt's time box runs
   * out (an outage, a slow deploy) holds its slots that long, and while it went on being sold leads
   * it took every slot there was, so every other buyer's leads waited behind its backlog. With a
   * share, it holds at most this many, and the rest go on delivering.
   */
  private readonly perBuyer: number;
  private readonly pollMs: number;
  private readonly inFlight = new Map<number, Promise<void>>();
  /** Attempts in flight by buyer. */
  private readonly buyerInFlight = new Map<string, number>();
  private readonly noticing = new Map<number, Promise<void>>();
  /**
   * Leads whose notice could not run to its record (the store refused it, say): left alone until
   * `until`, the wait doubling from a second to a minute, so a buyer is not sent the same notice at
   * every poll while its outcome cannot be written.
   */
  private readonly noticeHeld = new Map<number, { until: number; waitMs: number }>();
  /**
   * Leads this worker just settled or rescheduled, with the time to look at them again. The read
   * model shows an outcome a few ms after it is recorded; meanwhile the oldest due rows are the
   * ones just delivered, and re-reading them would take the slots of leads still waiting.
   */
  private readonly held = new Map<number, number>();
  /**
   * When this worker started the attempt that settled each lead it holds for that reason. A lagging
   * copy of the row is due no later than that (it is the due time the attempt was started for); a
   * delivery re-opened since (sent again after failing for good) is due at its request, which was
   * decided on the stream after the settling outcome was recorded, so no earlier. Such a row is
   * taken at once, not a minute later. Not the time the outcome came back: a redelivery requested
   * in the same millisecond as that (an admin's script, a test) then looked like a lagging copy,
   * and the lead waited out the whole hold. A lagging row due in the very millisecond its attempt
   * started is taken for re-opened: one read of its stream, which finds it settled.
   */
  private readonly settledAt = new Map<number, number>();
  /**
   * The due leads read and not yet started, in order. A slot that frees takes the next of them; the
   * rows are read again only when they run out, one page per BATCH attempts, not one per attempt.
   */
  private queue: Array<{ readonly leadId: number; readonly buyer: string }> = [];
  private queued = 0;
  /**
   * Where the current pass through the due rows stands (undefined: the next read starts a new one
   * from the oldest). A pass moves on past rows it cannot start yet (held, in flight), so a page of
   * those never hides the rows behind it.
   */
  private cursor: Cursor | undefined;
  private reading: Promise<void> | undefined;
  /** A wake or a freed slot came while reading: read again if the read found nothing to start. */
  private again = false;
  private running = false;
  private timer: NodeJS.Timeout | undefined;
  private polling: Promise<void> | undefined;

  /** A store that is down fails every poll, five a second: logged as an outage, not poll by poll. */
  private readonly pollFailures: OutageLog | undefined;
  private readonly noticePollFailures: OutageLog | undefined;
  /**
   * An attempt that cannot run (a store down: the key store, the event store) fails for every due
   * lead at every poll: logged as an outage too, not one line with its stack per lead and poll.
   */
  private readonly runFailures: OutageLog | undefined;

  constructor(private readonly deps: DeliveryWorkerDeps) {
    const polls = { one: 'poll', many: 'polls' };
    this.pollFailures = deps.logger && repeatedFailures(deps.logger, 'delivery poll failed', 'failed_polls', polls);
    this.noticePollFailures = deps.logger && repeatedFailures(deps.logger, 'erasure notice poll failed', 'failed_polls', polls);
    this.runFailures = deps.logger && repeatedFailures(deps.logger, 'delivery attempt failed to run', 'failed_runs', { one: 'run', many: 'runs' });
    this.concurrency = deps.concurrency ?? DEFAULT_CONCURRENCY;
    this.perBuyer = Math.min(deps.perBuyer ?? DEFAULT_PER_BUYER, this.concurrency);
    this.pollMs = deps.pollMs ?? 200;
    const count = deps.countSentAgain;
    // Per origin: two buyers behind one host (a platform's paths) may each use their share.
    this.agent = buyerAgent({ maxSockets: this.concurrency, ca: deps.ca, sentAgain: count && (() => count('delivery')) });
    // Notices have sockets of their own: a burst of them (a retention sweep) must not make the
    // deliveries wait for a connection to their buyer.
    this.noticeAgent = buyerAgent({ maxSockets: NOTICE_SOCKETS, ca: deps.ca, sentAgain: count && (() => count('erasure_notice')) });
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.schedule(0);
  }

  /**
   * Stops polling and waits for the attempts in flight to be recorded. A POST still unanswered
   * after `stopGraceMs` is cut short and recorded as failed, due again at its backoff: a process
   * must end within its shutdown budget, and an attempt cut off unrecorded would wait to be judged
   * lost (its timeout and 30 s more) before it is sent again.
   */
  async stop(): Promise<void> {
    this.running = false;
    clearTimeout(this.timer);
    this.timer = undefined;
    const cutShort = setTimeout(() => {
      this.cut = true;
      for (const cutter of this.cutters) cutter.abort();
    }, this.deps.stopGraceMs ?? STOP_GRACE_MS);
    try {
      await Promise.all([this.polling, this.reading]);
      await Promise.all([...this.inFlight.values(), ...this.noticing.values()]);
    } finally {
      clearTimeout(cutShort);
    }
    this.agent.destroy();
    this.noticeAgent.destroy();
  }

  /** The signals that cut short the attempts and notices in flight now (tests: how many listeners each has). */
  signalsInFlight(): AbortSignal[] {
    return [...this.cutters].map((cutter) => cutter.signal);
  }

  /** Looks for due leads now instead of at the next poll, e.g. once the deliveries read model has a new sale. */
  wake(): void {
    this.pump();
  }

  /**
   * The poll: erasure notices, and due leads a wake may not have announced (retries coming due,
   * sales recorded by another process). Between polls, a finished attempt starts the next one.
   */
  private schedule(delayMs: number): void {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const nowMs = this.now().getTime();
      for (const [leadId, until] of this.held) {
        if (until > nowMs) continue;
        this.held.delete(leadId);
        this.settledAt.delete(leadId);
      }
      for (const [leadId, held] of this.noticeHeld) if (held.until + NOTICE_HOLD_MAX_MS <= nowMs) this.noticeHeld.delete(leadId);
      this.polling = this.notices()
        .catch((error: unknown) => this.noticePollFailures?.failed(error))
        .finally(() => {
          this.polling = undefined;
          this.pump();
          if (this.running) this.schedule(this.pollMs);
        });
    }, delayMs);
    this.timer.unref();
  }

  /** Fills every free slot with the next due lead, reading more due rows when none are left. */
  private pump(): void {
    if (!this.running) return;
    const nowMs = this.now().getTime();
    while (this.inFlight.size < this.concurrency) {
      if (this.queued === this.queue.length) {
        this.readDue();
        return;
      }
      const { leadId, buyer } = this.queue[this.queued++]!;
      if (this.startable(leadId, nowMs) && this.hasRoom(buyer)) this.attempt(leadId, buyer);
    }
  }

  private readDue(): void {
    if (this.reading) {
      this.again = true;
      return;
    }
    this.again = false;
    this.reading = this.nextPage()
      .then((found) => {
        this.reading = undefined;
        // A page with nothing to start ends a pass or moves it on; an empty read of a new pass
        // waits for a wake, a freed slot or the poll.
        if (found || this.cursor !== undefined || this.again) this.pump();
      })
      .catch((error: unknown) => {
        this.reading = undefined;
        this.cursor = undefined;
        this.pollFailures?.failed(error);
      });
  }

  /** Reads the next page of due rows of the current pass into the queue; whether any can be started. */
  private async nextPage(): Promise<boolean> {
    // The embedded stores answer without I/O: without this, a pass through many pages (or a
    // page of leads skipped at once) would run in microtasks and starve the event loop.
    await new Promise((resolve) => setImmediate(resolve));
    // Buyers whose share is taken are left out of the read: a page of their rows would only be skipped.
    const webhookBuyers = this.webhookBuyers().filter((buyer) => this.hasRoom(buyer));
    if (webhookBuyers.length === 0) return false;
    const now = this.now();
    // Filtered on the buyer in the query: pull buyers' rows stay pending for good and would
    // otherwise fill every page ahead of the webhook ones.
    const due = await this.deps.readModels.find(this.deps.deliveries(), {
      filter: { status: 'pending', next_attempt_at: { $lte: now.toISOString() }, buyer: { $in: webhookBuyers } },
      sort: { field: 'next_attempt_at', direction: 'asc' },
      ...(this.cursor ? { after: this.cursor } : {}),
      limit: BATCH,
    });
    const last = due.at(-1);
    this.cursor = due.length === BATCH && typeof last?.next_attempt_at === 'string' ? { value: last.next_attempt_at, id: last._id } : undefined;
    const nowMs = now.getTime();
    this.queue = [];
    this.queued = 0;
    for (const row of due) {
      const leadId = row.lead_id;
      if (typeof leadId !== 'number' || typeof row.buyer !== 'string') continue;
      this.releaseIfReopened(leadId, row.next_attempt_at);
      if (this.startable(leadId, nowMs)) this.queue.push({ leadId, buyer: row.buyer });
    }
    return this.queue.length > 0;
  }

  /** Forgets the hold of a lead settled here whose row is due no earlier than its settling attempt started: re-opened since (see settledAt). */
  private releaseIfReopened(leadId: number, due: unknown): void {
    const settledAt = this.settledAt.get(leadId);
    if (settledAt === undefined || typeof due !== 'string' || Date.parse(due) < settledAt) return;
    this.held.delete(leadId);
    this.settledAt.delete(leadId);
  }

  private hasRoom(buyer: string): boolean {
    return (this.buyerInFlight.get(buyer) ?? 0) < this.perBuyer;
  }

  /** Not in flight here, nor held aside (see hold). */
  private startable(leadId: number, nowMs: number): boolean {
    return !this.inFlight.has(leadId) && (this.held.get(leadId) ?? 0) <= nowMs;
  }

  /**
   * The `lead.erased` notices due now, one at a time per lead: every buyer's, also one that takes
   * no webhook now, whose notice is then recorded failed (see sendErasureNotice).
   */
  private async notices(): Promise<void> {
    const now = this.now();
    const due = await this.deps.readModels.find(this.deps.deliveries(), {
      filter: { notice: 'pending', notice_next_at: { $lte: now.toISOString() } },
      sort: { field: 'notice_next_at', direction: 'asc' },
      limit: BATCH,
    });
    for (const row of due) {
      const leadId = row.lead_id;
      if (!this.running || typeof leadId !== 'number' || this.noticing.has(leadId)) continue;
      const held = this.noticeHeld.get(leadId);
      if (held && held.until > now.getTime()) continue;
      const cutter = this.cutter();
      const run = sendErasureNotice({ ...this.sendDeps(cutter.signal), agent: this.noticeAgent }, leadId)
        .then((outcome) => {
          // Its lead still on the way to the buyer: asked again a little later, without a line
          // in the log at every poll for as long as the attempt may take.
          if (outcome === 'delivery_in_flight') {
            this.noticeHeld.set(leadId, { until: this.now().getTime() + NOTICE_HOLD_MIN_MS, waitMs: NOTICE_HOLD_MIN_MS });
            return;
          }
          this.noticeHeld.delete(leadId);
          // A notice found sent already (its row not yet updated by the projector) is no news.
          if (outcome === 'skipped') this.deps.logger?.debug({ lead_id: leadId, outcome }, 'lead.erased notice');
          else this.deps.logger?.info({ lead_id: leadId, outcome }, 'lead.erased notice');
        })
        .catch((error: unknown) => {
          const waitMs = held ? Math.min(held.waitMs * 2, NOTICE_HOLD_MAX_MS) : NOTICE_HOLD_MIN_MS;
          this.noticeHeld.set(leadId, { until: this.now().getTime() + waitMs, waitMs });
          this.deps.logger?.warn({ err: error, lead_id: leadId }, 'lead.erased notice failed to run');
        })
        .finally(() => {
          this.cutters.delete(cutter);
          this.noticing.delete(leadId);
        });
      this.noticing.set(leadId, run);
    }
  }

  private webhookBuyers(): string[] {
    return this.deps
      .routing()
      .buyers.filter((b) => b.delivery.kind === 'webhook')
      .map((b) => b.id);
  }

  /** A signal of its own for one attempt or notice, aborted by stop() when it cuts the POSTs short; forgotten when the work ends. */
  private cutter(): AbortController {
    const cutter = new AbortController();
    if (this.cut) cutter.abort();
    this.cutters.add(cutter);
    return cutter;
  }

  /** What sending a lead or an erasure notice to a buyer needs, with the routing file as it is now. */
  private sendDeps(signal: AbortSignal) {
    const routing = this.deps.routing();
    return {
      events: this.deps.events,
      buyer: (id: string) => routing.buyers.find((b) => b.id === id),
      env: this.deps.env ?? process.env,
      now: () => this.now(),
      backoff: this.deps.backoff ?? backoffMs,
      agent: this.agent,
      signal,
    };
  }

  private attempt(leadId: number, buyer: string): void {
    const cutter = this.cutter();
    const startedMs = this.now().getTime();
    this.buyerInFlight.set(buyer, (this.buyerInFlight.get(buyer) ?? 0) + 1);
    const run = deliverLead(
      { ...this.sendDeps(cutter.signal), personalData: this.deps.personalData, lostAfterMs: this.deps.lostAfterMs, logger: this.deps.logger },
      leadId,
    )
      .then((report) => {
        this.hold(leadId, report, startedMs);
        this.deps.onAttempt?.(leadId, report);
      })
      .catch((error: unknown) => {
        this.held.set(leadId, this.now().getTime() + this.pollMs);
        this.runFailures?.failed(error, { lead_id: leadId });
      })
      .finally(() => {
        this.cutters.delete(cutter);
        this.inFlight.delete(leadId);
        const left = this.buyerInFlight.get(buyer)! - 1;
        if (left > 0) this.buyerInFlight.set(buyer, left);
        else this.buyerInFlight.delete(buyer);
        this.pump();
      });
    this.inFlight.set(leadId, run);
  }

  /**
   * Until when this worker leaves a lead alone after an attempt: a settled one for good (as far as
   * the read model's lag goes), a rescheduled one until its retry, and one it could not start (in
   * flight elsewhere, not yet due, or no longer a webhook buyer's) until the next poll. Without the
   * last, a freed slot would take the same row again at once, round and round.
   */
  private hold(leadId: number, report: AttemptReport, startedMs: number): void {
    const nowMs = this.now().getTime();
    const settled = (report.kind === 'recorded' && report.retryAt === null) || (report.kind === 'skipped' && SETTLED.has(report.reason));
    let until = nowMs + this.pollMs;
    if (settled) until = nowMs + SETTLED_HOLD_MS;
    else if (report.kind === 'recorded' && report.retryAt !== null) until = Date.parse(report.retryAt);
    this.held.set(leadId, until);
    if (settled) this.settledAt.set(leadId, startedMs);
    else this.settledAt.delete(leadId);
  }

  private now(): Date {
    return this.deps.now?.() ?? new Date();
  }
}
