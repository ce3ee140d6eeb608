import type { RoutingConfig } from '../routing/load-config.js';

// How the lead of a delivery row reaches its target, in the routing file's words (a buyer's
// `delivery.kind`): `webhook`, the service POSTs it to the buyer; `pull`, the buyer lists it and
// acknowledges it. A bucket's row has none: a lead left in a bucket is sent to no one.
//
// A delivered row says how it was delivered, as its LeadDelivered recorded it (`via`). Any other
// row says what the service does with it now, which is the buyer's delivery in the routing file in
// force: the webhook worker and the acknowledgement route both follow the file, so the pending
// leads of a buyer switched from webhook to pull are pulled, and those of one switched to webhook
// are sent. A buyer the file no longer names is treated as pull by both (no worker sends its
// leads; its key may still acknowledge them), so its rows say pull.

export const DELIVERY_KINDS = ['pull', 'webhook'] as const;
type DeliveryKind = (typeof DELIVERY_KINDS)[number];

const isKind = (value: unknown): value is DeliveryKind => (DELIVERY_KINDS as readonly unknown[]).includes(value);

/** The delivery kind of a row of the deliveries read model; null for a bucket's row. */
export function deliveryKindOf(row: Readonly<Record<string, unknown>>, routing: Pick<RoutingConfig, 'buyers'>): DeliveryKind | null {
  if (typeof row.buyer !== 'string') return null;
  if (isKind(row.via)) return row.via;
  return routing.buyers.find((buyer) => buyer.id === row.buyer)?.delivery.kind ?? 'pull';
}
