// The reliability suites run twice over: bounded numbers in `npm test`, heavy ones in
// `npm run test:stress` (LEADPOST_STRESS=1). Every figure a suite uses comes from here, so the
// two runs differ in size only, never in what they check.

export const STRESS = process.env.LEADPOST_STRESS === '1';

/** The bounded figure in `npm test`, the stress figure under LEADPOST_STRESS=1. */
export const scale = (bounded: number, stress: number): number => (STRESS ? stress : bounded);

/** A seed from `name` in the environment (to reproduce a run), else `fallback`. */
export function seedFrom(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback >>> 0;
  const seed = Number(raw);
  if (!Number.isSafeInteger(seed)) throw new Error(`${name} must be an integer, not ${raw}`);
  return seed >>> 0;
}
