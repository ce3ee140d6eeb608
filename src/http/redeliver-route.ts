import type Router from '@koa/router';
import type { Middleware } from 'koa';
import { RedeliveryRefusedError, type RedeliveryRefusal } from '../delivery/attempt.js';
import { type Reopened, redeliveryErrors, requestRedelivery } from '../delivery/redeliver.js';
import type { EventStore } from '../event-store/port.js';
import type { ReadBack } from '../read-models/read-back.js';
import type { RoutingConfig } from '../routing/load-config.js';
import { type Authenticate, authenticate, requireRole } from './auth.js';
import { jsonWhenSent, readOptionalJsonBody } from './body.js';
import { ShellError } from './errors.js';
import type { ShellState } from './state.js';

// POST /functions/deliveries/{lead_id}/redeliver: an admin sends a delivery that failed for good
// once more, after the buyer fixed its side (see src/delivery/redeliver.ts); for a lead whose
// personal data is gone, the `lead.erased` notice to its buyer that failed for good. The answer is
// the delivery row as it now stands, folded from the lead's stream: `pending` (or its `notice`
// `pending`), due at once, and a message saying which of the two was re-opened.

export interface RedeliverRouteDeps {
  readonly events: EventStore;
  readonly readBack: ReadBack;
  readonly now: () => Date;
  readonly bodyBytes: number;
  readonly routing: () => Pick<RoutingConfig, 'buyers'>;
}

const LEAD_ID = /^[1-9]\d{0,15}$/;

/** What the caller is told for each refusal: the shared codes' own messages speak of other routes. */
const REFUSALS: Readonly<Record<RedeliveryRefusal, string | undefined>> = {
  NOT_FOUND: undefined,
  NOT_FAILED: undefined,
  // Only a lead whose personal data is gone, with no notice to its buyer, is refused so: its delivery may have been made, or cancelled.
  DELIVERY_CANCELLED: "The lead's personal data was erased or expired, and its buyer is sent no `lead.erased` notice: there is nothing left to send.",
  ALREADY_RETURNED: 'The buyer returned the lead: it is not sent again.',
  BUYER_UNKNOWN: undefined,
};
/** The refusals this route words its own way (its reference documentation shows them). */
export const REDELIVERY_MESSAGES = Object.fromEntries(Object.entries(REFUSALS).filter(([, message]) => message !== undefined)) as Partial<Record<RedeliveryRefusal, string>>;

/** Of a lead whose personal data is gone, it is the `lead.erased` notice that was refused. */
const NOTICE_REFUSALS: Partial<Record<RedeliveryRefusal, string>> = {
  NOT_FAILED: "The lead's personal data is gone and its `lead.erased` notice has not failed for good (it was sent, or is still being sent): there is nothing to send again.",
  BUYER_UNKNOWN: "The buyer of the lead's `lead.erased` notice is not in the routing file in force: re-opened, the notice would wait for ever.",
};

const REOPENED = {
  LeadRedeliveryRequested: 'Delivery re-opened: the webhook worker sends the lead again now.',
  ErasureNoticeRedeliveryRequested: "`lead.erased` notice re-opened: the lead's personal data is gone, and the webhook worker sends the buyer the notice it missed again now.",
} as const;

export function registerRedeliverRoute(router: Router<ShellState>, lookup: Authenticate, deps: RedeliverRouteDeps, limit: Middleware<ShellState>): void {
  router.post('/functions/deliveries/:lead_id/redeliver', authenticate(lookup), requireRole('admin'), limit, jsonWhenSent, async (ctx) => {
    const id = ctx.params.lead_id ?? '';
    if (!LEAD_ID.test(id)) throw new ShellError('NOT_FOUND');
    const { body, repeated } = await readOptionalJsonBody(ctx.req, deps.bodyBytes);
    const errors = redeliveryErrors(body, repeated);
    if (errors.length > 0) throw new ShellError('INVALID', {}, 'invalid redelivery', errors);
    const principal = ctx.state.principal!;
    const buyers = deps.routing().buyers;
    const origin = {
      principal,
      traceId: ctx.state.traceId,
      now: deps.now(),
      reason: typeof body.reason === 'string' ? body.reason : null,
      buyerKnown: (buyer: string) => buyers.some((known) => known.id === buyer),
    };
    let reopened: Reopened;
    try {
      reopened = await requestRedelivery(deps.events, Number(id), origin);
    } catch (error) {
      if (!(error instanceof RedeliveryRefusedError)) throw error;
      const message = (error.subject === 'notice' ? NOTICE_REFUSALS[error.code] : undefined) ?? REFUSALS[error.code];
      throw new ShellError(error.code, {}, error.code, undefined, message);
    }
    ctx.status = 202;
    const delivery = await deps.readBack.delivery(principal, Number(id));
    ctx.body = {
      ok: true,
      trace_id: ctx.state.traceId,
      code: 'OK',
      message:
        reopened.type === 'LeadRedeliveryRequested' && delivery?.delivery_kind === 'pull'
          ? 'Delivery re-opened: the buyer now pulls its leads, so it lists and acknowledges this one (no worker sends it).'
          : REOPENED[reopened.type],
      delivery,
    };
  });
}
