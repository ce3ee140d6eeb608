import type { AllSubscription, Position, RecordedEvent } from '../port.js';

const PAGE = 1000;

/**
 * A catch-up subscription to `$all` on the embedded store: reads pages after its position until
 * it has caught up, then waits to be woken by an append in this process or by its poll timer,
 * which is how it sees appends made by other processes sharing the data dir.
 */
export class PollingSubscription implements AllSubscription {
  private stopped = false;
  private wake: (() => void) | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** When this subscription last read the disk rather than only this process's recent appends. */
  private lastDiskRead = 0;

  constructor(
    private position: Position,
    /** `recentOnly`: the caller read the disk less than a poll interval ago; appends of this process suffice. */
    private readonly readPage: (from: Position, maxCount: number, recentOnly: boolean) => RecordedEvent[],
    private readonly pollIntervalMs: number,
    private readonly onStop: () => void,
  ) {}

  /** New events may have been written: stop waiting. */
  notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  async unsubscribe(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.notify();
    this.onStop();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<RecordedEvent> {
    let caughtUp = false;
    try {
      while (!this.stopped) {
        // Only a subscriber that has caught up may skip the disk: one still reading history must.
        const now = Date.now();
        const recentOnly = caughtUp && now - this.lastDiskRead < this.pollIntervalMs;
        if (!recentOnly) this.lastDiskRead = now;
        const page = this.readPage(this.position, PAGE, recentOnly);
        caughtUp = page.length < PAGE;
        for (const event of page) {
          if (this.stopped) return;
          this.position = event.position;
          yield event;
        }
        if (page.length < PAGE && !this.stopped) await this.idle();
        // Catching up, every page is at hand at once: without a pause the whole backlog would be
        // read in one run of promises, and timers (the other subscribers' polls) and I/O (HTTP)
        // would wait until it is done.
        else if (!this.stopped) await new Promise<void>((resolve) => setImmediate(resolve));
      }
    } finally {
      if (!this.stopped) await this.unsubscribe();
    }
  }

  private idle(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.wake = () => {
        if (this.timer) clearTimeout(this.timer);
        this.timer = undefined;
        resolve();
      };
      this.timer = setTimeout(() => this.notify(), this.pollIntervalMs);
    });
  }
}
