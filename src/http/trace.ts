import { pooledRandom16 } from '../random-pool.js';

// W3C Trace Context: lower-case hex, neither id all zeros. Version 00 is exactly its four fields; a
// later version (any but ff, which is invalid) is read by the same first four, and may add fields
// after a dash, as the spec asks of a reader that knows an earlier version. A repeated header is
// joined by Node with ', ' and so fails the pattern, which is what the spec asks (restart the trace).
const TRACEPARENT = /^(?:00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}|(?!00|ff)[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(?:-.*)?)$/;
const ALL_ZERO = /^0+$/;

export function newTraceId(): string {
  return pooledRandom16().toString('hex');
}

/** The trace id of a valid `traceparent`, else a fresh one. */
export function traceIdFrom(traceparent: string | undefined): string {
  const match = traceparent ? TRACEPARENT.exec(traceparent) : null;
  const traceId = match?.[1] ?? match?.[3];
  const parentId = match?.[2] ?? match?.[4];
  if (traceId === undefined || parentId === undefined) return newTraceId();
  if (ALL_ZERO.test(traceId) || ALL_ZERO.test(parentId)) return newTraceId();
  return traceId;
}
