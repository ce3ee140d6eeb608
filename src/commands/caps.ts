import { type EventStore, WrongExpectedRevisionError } from '../event-store/index.js';
import { MAX_RACES } from './streams.js';

// Buyer caps. Each cap period of a buyer is a stream (`cap-acme-law-0-2026-11-21`); a sale takes
// a slot by appending at the revision it read, so the count can never pass the cap, however many
// posts or instances race for the last slot. What this instance has read of each stream is kept,
// so a check reads only what others appended since.

export interface CapPeriod {
  /** Position of the cap in the buyer's `caps` list. */
  readonly index: number;
  readonly max: number;
  /** The current period in the cap's time zone, e.g. `2026-11-21`. */
  readonly key: string;
}

interface Usage {
  revision: number | 'no_stream';
  used: number;
}

const MAX_CACHED_PERIODS = 10_000;

export const capStream = (buyer: string, cap: CapPeriod): string => `cap-${buyer}-${cap.index}-${cap.key}`;

export class CapLedger {
  private readonly usage = new Map<string, Usage>();
  /** One check-and-take at a time per period in this process: the cached count is shared. */
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(private readonly store: EventStore) {}

  /** Takes one slot in every cap of the buyer, or none (false: a cap is full). */
  async reserve(buyer: string, caps: readonly CapPeriod[], leadId: number): Promise<boolean> {
    const taken: string[] = [];
    for (const cap of caps) {
      if (!(await this.take(capStream(buyer, cap), cap.max, leadId))) {
        for (const stream of taken) await this.give(stream, leadId);
        return false;
      }
      taken.push(capStream(buyer, cap));
    }
    return true;
  }

  /** Gives back the slots of a reservation whose lead was not recorded. */
  async release(buyer: string, caps: readonly CapPeriod[], leadId: number): Promise<void> {
    for (const cap of caps) await this.give(capStream(buyer, cap), leadId);
  }

  private take(stream: string, max: number, leadId: number): Promise<boolean> {
    const previous = this.queues.get(stream) ?? Promise.resolve();
    const next = previous.then(() => this.takeNow(stream, max, leadId));
    const settled = next.catch(() => {});
    this.queues.set(stream, settled);
    void settled.then(() => {
      if (this.queues.get(stream) === settled) this.queues.delete(stream);
    });
    return next;
  }

  private async takeNow(stream: string, max: number, leadId: number): Promise<boolean> {
    for (let race = 0; race < MAX_RACES; race++) {
      const usage = await this.catchUp(stream);
      if (usage.used >= max) return false;
      try {
        const result = await this.store.append(stream, [{ type: 'CapSlotTaken', data: { lead_id: leadId } }], {
          expectedRevision: usage.revision,
        });
        usage.revision = result.nextExpectedRevision;
        usage.used += 1;
        return true;
      } catch (error) {
        if (!(error instanceof WrongExpectedRevisionError)) throw error;
      }
    }
    throw new Error(`could not take a cap slot after ${MAX_RACES} races`);
  }

  private async give(stream: string, leadId: number): Promise<void> {
    await this.store.append(stream, [{ type: 'CapSlotReleased', data: { lead_id: leadId } }]);
  }

  private async catchUp(stream: string): Promise<Usage> {
    let usage = this.usage.get(stream);
    if (!usage) {
      if (this.usage.size >= MAX_CACHED_PERIODS) this.usage.delete(this.usage.keys().next().value!);
      usage = { revision: 'no_stream', used: 0 };
      this.usage.set(stream, usage);
    }
    const fromRevision = usage.revision === 'no_stream' ? 0 : usage.revision + 1;
    for (const event of await this.store.readStream(stream, { fromRevision })) {
      usage.used += event.type === 'CapSlotTaken' ? 1 : -1;
      usage.revision = event.revision;
    }
    return usage;
  }
}
