// What /metrics exposes, on a registry of its own (no prom-client globals, so two services in one
// test process do not share counters). Labels are route templates, statuses, outcome codes,
// projection names and delivery outcomes: small fixed sets, and never a URL, key, supplier,
// buyer or consumer value, so no PII can reach a scrape and no client can grow the label space.

import type { Context } from 'koa';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { releaseVersion } from '../version.js';
import type { BuyerRequestKind } from '../delivery/buyer-agent.js';
import type { AttemptReport } from '../delivery/deliver-lead.js';
import type { CheckName, Enrichment } from '../enrichment/check.js';
import type { PingBid } from '../events/ping-events.js';
import { routePattern } from '../http/shell.js';
import type { ProjectionStatus } from '../projections/runner.js';
import type { LeaseStatus } from '../roles/lease-keeper.js';
import type { AppendResultLabel } from './counting-event-store.js';
import type { ReloadResult } from './reload.js';

const POST_LEAD_ROUTE = '/functions/leads';
const PING_ROUTE = '/functions/pings';
const REDELIVER_ROUTE = '/functions/deliveries/:lead_id/redeliver';
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
/** Seconds; a post is usually a few ms, a slow verification provider a few hundred. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const CHECKS: readonly CheckName[] = ['phone', 'email', 'consent'];
/**
 * Why a check answered `unknown`, as a label: the reasons this service gives. An HTTP provider may
 * answer `unknown` with a detail of its own, which is `other` here, so a provider cannot grow the
 * label space.
 */
const UNKNOWN_REASONS: ReadonlySet<string> = new Set(['timeout', 'provider_error', 'dns_error', 'dns_unreliable', 'lookup_off']);

export interface ServiceMetricsOptions {
  /** The status of every running projection, read at each scrape. */
  readonly projections?: () => Promise<ProjectionStatus[]>;
  /** The roles this process runs (`serve --roles`), and the leases it keeps for them. */
  readonly roles?: { readonly all: readonly string[]; readonly running: readonly string[]; readonly leases: () => LeaseStatus[] };
  /** The version of the routing file in force (it changes on a reload), read at each scrape. */
  readonly routingVersion?: () => string;
  /** Process and Node.js runtime metrics (memory, event-loop delay, …); defaults to true. */
  readonly runtime?: boolean;
}

export class ServiceMetrics {
  readonly registry = new Registry();
  private readonly requests: Histogram<'method' | 'route' | 'status'>;
  private readonly leads: Counter<'code' | 'replayed'>;
  private readonly pings: Counter<'code'>;
  private readonly redeliveries: Counter<'code'>;
  private readonly appends: Counter<'result'>;
  private readonly appendedEvents: Counter;
  private readonly deliveries: Counter<'outcome'>;
  private readonly sentAgain: Counter<'kind'>;
  private readonly bids: Counter<'kind' | 'result'>;
  private readonly checks: Counter<'check' | 'result' | 'reason'>;
  private readonly reloads: Counter<'what' | 'result'>;

  constructor(options: ServiceMetricsOptions = {}) {
    const registers = [this.registry];
    this.requests = new Histogram({
      name: 'leadpost_http_request_duration_seconds',
      help: 'HTTPS request latency, by method, route template (unmatched: no route) and status',
      labelNames: ['method', 'route', 'status'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.leads = new Counter({
      name: 'leadpost_lead_posts_total',
      help: 'POST /functions/leads answers by outcome code; replayed="true": an Idempotency-Key replay, nothing new recorded',
      labelNames: ['code', 'replayed'],
      registers,
    });
    this.pings = new Counter({
      name: 'leadpost_pings_total',
      help: 'POST /functions/pings answers by code (BID, NO_BID, INVALID, …)',
      labelNames: ['code'],
      registers,
    });
    this.redeliveries = new Counter({
      name: 'leadpost_redeliveries_total',
      help: 'POST /functions/deliveries/{lead_id}/redeliver answers by code: OK re-opened a delivery, or the lead.erased notice of an erased lead, that failed for good; NOT_FAILED, DELIVERY_CANCELLED, … refused it',
      labelNames: ['code'],
      registers,
    });
    this.appends = new Counter({
      name: 'leadpost_event_store_appends_total',
      help: 'Appends to the event store by result (conflict: expected revision did not match, retried by the caller)',
      labelNames: ['result'],
      registers,
    });
    this.appendedEvents = new Counter({
      name: 'leadpost_event_store_appended_events_total',
      help: 'Events written to the event store',
      registers,
    });
    this.deliveries = new Counter({
      name: 'leadpost_delivery_attempts_total',
      help: 'Webhook delivery attempts by outcome (delivered, retrying, failed, given_up, superseded)',
      labelNames: ['outcome'],
      registers,
    });
    this.sentAgain = new Counter({
      name: 'leadpost_buyer_requests_resent_total',
      help: 'Requests to buyers (bid, delivery, erasure_notice) sent once more because the kept connection they went out on had been closed by the buyer',
      labelNames: ['kind'],
      registers,
    });
    this.bids = new Counter({
      name: 'leadpost_ping_bids_total',
      help: "Buyers' answers to pings, by bidder kind (static, webhook) and result (bid, no_bid, ineligible, below_min_bid, above_max_bid, invalid, timeout, error)",
      labelNames: ['kind', 'result'],
      registers,
    });
    this.checks = new Counter({
      name: 'leadpost_lead_checks_total',
      help: 'Phone, e-mail and consent checks of posted leads by result; reason says why a check is unknown (timeout, provider_error, dns_error, dns_unreliable, lookup_off, other)',
      labelNames: ['check', 'result', 'reason'],
      registers,
    });
    this.reloads = new Counter({
      name: 'leadpost_reloads_total',
      help: 'Reloads (SIGHUP, or a change the routing file watch saw) of the routing file and the TLS certificate (what), by result: changed, unchanged, or refused (the file on disk does not load; what was in force stays)',
      labelNames: ['what', 'result'],
      registers,
    });
    // The version is the label: a dashboard shows which release each instance runs, and when it changed.
    new Gauge({ name: 'leadpost_build_info', help: 'The release this process runs (always 1; the version is the label)', labelNames: ['version'], registers }).set({ version: releaseVersion() }, 1);
    if (options.routingVersion) {
      const version = options.routingVersion;
      // As the build: a dashboard shows which routing each instance runs, so an instance a reload missed stands out.
      new Gauge({
        name: 'leadpost_routing_info',
        help: 'The routing file this process routes by (always 1; its version is the label, as LeadRouted records it)',
        labelNames: ['version'],
        registers,
        collect() {
          this.reset();
          this.set({ version: version() }, 1);
        },
      });
    }
    if (options.projections) this.projectionGauges(options.projections);
    if (options.roles) this.roleGauges(options.roles);
    if (options.runtime !== false) collectDefaultMetrics({ register: this.registry });
  }

  /** A request answered, `started` at performance.now() when it came in; called by the outermost middleware, which sees the status and envelope the shell settled on. */
  observeRequest(ctx: Context, started: number): void {
    const route = routePattern(ctx) ?? 'unmatched';
    const method = METHODS.has(ctx.method) ? ctx.method : 'OTHER';
    this.requests.observe({ method, route, status: String(ctx.status) }, (performance.now() - started) / 1000);
    if (route === POST_LEAD_ROUTE && method === 'POST') {
      const code = (ctx.body as { code?: unknown } | null)?.code;
      const replayed = ctx.response.get('Idempotency-Replayed') === 'true' ? 'true' : 'false';
      if (typeof code === 'string') this.leads.inc({ code, replayed });
    }
    if ((route === PING_ROUTE || route === REDELIVER_ROUTE) && method === 'POST') {
      const code = (ctx.body as { code?: unknown } | null)?.code;
      if (typeof code === 'string') (route === PING_ROUTE ? this.pings : this.redeliveries).inc({ code });
    }
  }

  readonly countAppend = (result: AppendResultLabel, events: number, appends = 1): void => {
    this.appends.inc({ result }, appends);
    if (events > 0) this.appendedEvents.inc(events);
  };

  readonly countDeliveryAttempt = (_leadId: number, report: AttemptReport): void => {
    const outcome = deliveryOutcome(report);
    if (outcome) this.countDeliveryOutcome(outcome);
  };

  /** Attempts counted elsewhere (the background thread), by outcome. */
  readonly countDeliveryOutcome = (outcome: string, attempts = 1): void => {
    this.deliveries.inc({ outcome }, attempts);
  };

  readonly countSentAgain = (kind: BuyerRequestKind, requests = 1): void => {
    this.sentAgain.inc({ kind }, requests);
  };

  readonly countBids = (bids: readonly PingBid[]): void => {
    for (const bid of bids) this.bids.inc({ kind: bid.kind, result: bid.result });
  };

  readonly countChecks = (enrichment: Enrichment): void => {
    for (const check of CHECKS) {
      const { result, detail } = enrichment[check];
      if (result !== 'unknown') this.checks.inc({ check, result });
      else this.checks.inc({ check, result, reason: UNKNOWN_REASONS.has(detail) ? detail : 'other' });
    }
  };

  /** A reload's outcome, for an alert on a routing file or certificate on disk that does not load. */
  readonly countReload = (result: ReloadResult): void => {
    this.reloads.inc({ what: 'routing', result: 'refused' in result.routing ? 'refused' : result.routing.changed ? 'changed' : 'unchanged' });
    this.reloads.inc({ what: 'tls', result: 'refused' in result.tls ? 'refused' : result.tls.changed ? 'changed' : 'unchanged' });
  };

  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  private roleGauges(roles: NonNullable<ServiceMetricsOptions['roles']>): void {
    const role = new Gauge({ name: 'leadpost_role', help: 'Roles this process runs (1) or not (0): api, projector, delivery', labelNames: ['role'], registers: [this.registry] });
    for (const name of roles.all) role.set({ role: name }, roles.running.includes(name) ? 1 : 0);
    new Gauge({
      name: 'leadpost_lease_held',
      help: 'Whether this process holds the lease of a role it runs (1: it does the work; 0: it stands by)',
      labelNames: ['lease'],
      registers: [this.registry],
      collect() {
        for (const lease of roles.leases()) this.set({ lease: lease.lease }, lease.held ? 1 : 0);
      },
    });
  }

  private projectionGauges(statuses: () => Promise<ProjectionStatus[]>): void {
    // One read of the statuses per scrape, shared by the three gauges.
    let current: Promise<ProjectionStatus[]> | undefined;
    const read = (): Promise<ProjectionStatus[]> => {
      current ??= statuses()
        .catch(() => [])
        .finally(() => setImmediate(() => (current = undefined)));
      return current;
    };
    const gauge = (name: string, help: string, value: (s: ProjectionStatus) => number) =>
      new Gauge({
        name,
        help,
        labelNames: ['projection'],
        registers: [this.registry],
        async collect() {
          // A store that does not answer leaves the last values: a scrape never fails for it.
          for (const status of await read()) this.set({ projection: status.projection }, value(status));
        },
      });
    gauge('leadpost_projection_lag_seconds', 'Age of the oldest event a projection has not handled yet (0 when caught up)', (s) => s.lagSeconds);
    gauge('leadpost_projection_events_behind', 'Events a projection has not handled yet: counted up to 100, estimated from $all positions beyond', (s) => s.eventsBehind);
    gauge('leadpost_projection_position', 'Commit position a projection has reached in $all', (s) => s.position.commit);
  }
}

/** The `outcome` label of an attempt; null for a lead skipped without an attempt. */
export function deliveryOutcome(report: AttemptReport): string | null {
  if (report.kind === 'skipped') return null;
  if (report.kind === 'superseded') return 'superseded';
  if (report.outcome === 'LeadDelivered') return 'delivered';
  if (report.outcome === 'given_up') return 'given_up';
  return report.retryAt === null ? 'failed' : 'retrying';
}
