/**
 * Polls `probe` until it gives a truthy value and returns that value; fails after `withinMs`
 * with an error naming what was awaited and the last value seen (or the probe's last error).
 * Tests wait for something observable this way instead of sleeping a fixed time, which breaks on
 * a machine slower than the one the sleep was tuned on.
 */
export async function until<T>(
  what: string | (() => string),
  probe: () => T | Promise<T>,
  withinMs = 10_000,
  intervalMs = 15,
): Promise<Exclude<T, false | 0 | '' | null | undefined>> {
  const deadline = Date.now() + withinMs;
  let last: T | undefined;
  for (;;) {
    last = await probe();
    if (last) return last as Exclude<T, false | 0 | '' | null | undefined>;
    if (Date.now() > deadline) {
      const named = typeof what === 'function' ? what() : what;
      const seen = last === undefined || last === false ? '' : ` (last seen: ${describe(last)})`;
      throw new Error(`timed out after ${withinMs} ms waiting for ${named}${seen}`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

function describe(value: unknown): string {
  try {
    return typeof value === 'string' ? value : JSON.stringify(value);
  } catch {
    return String(value);
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
