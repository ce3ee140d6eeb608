// What start-up has opened so far. A step that fails (a master key that opens none of the stored
// secrets, a port in use) must close what the steps before it opened: their threads and timers
// would otherwise keep the process alive after its error line, listening on nothing, until killed.

export class Opened {
  private readonly closers: Array<() => unknown> = [];

  constructor(private readonly onCloseError: (error: unknown) => void) {}

  /** One more step of start-up; when it fails, what is open is closed (newest first) and its error thrown. */
  async step<T>(open: () => T | Promise<T>, close?: (opened: T) => unknown): Promise<T> {
    let value: T;
    try {
      value = await open();
    } catch (error) {
      // The step's failure is what the operator must see, not a failure to close after it.
      await this.closeAll().catch(this.onCloseError);
      throw error;
    }
    if (close) this.closers.push(() => close(value));
    return value;
  }

  /** Closes what is open, newest first. */
  async closeAll(): Promise<void> {
    for (let close = this.closers.pop(); close; close = this.closers.pop()) await close();
  }
}
