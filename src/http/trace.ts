import { pooledRandom16 } from '../random-pool.js';

// W3C Trace Context, version 00 only: lower-case hex, neither id all zeros. A repeated header is
// joined by Node with ', ' and so fails the pattern, which is what the spec asks (restart the trace).
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/;
const ALL_ZERO = /^0+$/;

export function newTraceId(): string {
  return pooledRandom16().toString('hex');
}

/** The trace id of a valid `traceparent`, else a fresh one. */
export function traceIdFrom(traceparent: string | undefined): string {
  const match = traceparent ? TRACEPARENT.exec(traceparent) : null;
  const traceId = match?.[1];
  const parentId = match?.[2];
  if (traceId === undefined || parentId === undefined) return newTraceId();
  if (ALL_ZERO.test(traceId) || ALL_ZERO.test(parentId)) return newTraceId();
  return traceId;
}
