/**
 * Polls `probe` every `intervalMs` until it gives a truthy value, and returns that value; after
 * `withinMs` fails with an error naming what was awaited and, when the probe gave one, the last
 * value seen. A probe that throws fails the wait at once.
 *
 * Tests wait for something observable this way, not for a fixed sleep: a sleep tuned on one
 * machine is too short on one twice as slow (CI's speed drifts that much).
 */
export async function until<T>(
  what: string | (() => string),
  probe: () => T | Promise<T>,
  withinMs = 10_000,
  intervalMs = 15,
): Promise<Exclude<T, false | 0 | '' | null | undefined>> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const last = await probe();
    if (last) return last as Exclude<T, false | 0 | '' | null | undefined>;
    if (Date.now() > deadline) {
      const named = typeof what === 'function' ? what() : what;
      const seen = last === undefined || last === false ? '' : ` (last seen: ${shown(last)})`;
      throw new Error(`timed out after ${withinMs} ms waiting for ${named}${seen}`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

function shown(value: unknown): string {
  try {
    return typeof value === 'string' ? value : JSON.stringify(value);
  } catch {
    return String(value);
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
