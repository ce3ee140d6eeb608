import type Router from '@koa/router';
import { Ajv } from 'ajv';
import type { Context, Middleware } from 'koa';
import type { ConsumerEraser } from '../commands/erasure.js';
import { type FieldError, oncePerField, repeatedFields, unknownFields } from '../leads/outcome.js';
import { type ConsumerQuery, normaliseConsumer } from '../leads/validate.js';
import type { ReadBack } from '../read-models/read-back.js';
import { type Authenticate, authenticate, requireRole } from './auth.js';
import { parseJsonBody, readBody, requireJson } from './body.js';
import { ShellError } from './errors.js';
import { guarded, ok } from './read-routes.js';
import type { ShellState } from './state.js';

// A consumer's rights over its personal data, for an admin acting on the consumer's request:
// erasure (POST /functions/erasures, GET /functions/erasures and /functions/erasures/{id}) and access
// (POST /functions/consumers/lookup). A consumer is named by e-mail and/or mobile, normalised as a
// posted lead's are; neither value is ever echoed, logged or put in a stream name.
//
// Access is asked with the contacts in a JSON body: a URL's query string is written down by every
// proxy, load balancer and access log in front of the service, so a consumer's e-mail and mobile
// do not belong there. GET /functions/consumers?email=&mobile= answers the same and is kept for
// the clients that already use it.

export interface ErasureRouteDeps {
  readonly eraser: ConsumerEraser;
  /** The consumer's lead ids, as of the event store's head when asked. */
  readonly leadIdsOf: (consumer: { email?: string; mobile?: string }) => Promise<number[]>;
  readonly readBack: ReadBack;
  readonly bodyBytes: number;
}

const ERASURE_FIELDS = ['email', 'mobile', 'suppress'];

/** The body of an access request: the consumer's contacts, at least one (normalised and checked as a posted lead's). */
export const CONSUMER_LOOKUP_SCHEMA = {
  $id: 'ConsumerLookup',
  type: 'object',
  additionalProperties: false,
  description: 'The consumer, by e-mail and/or mobile (at least one).',
  properties: {
    email: { type: 'string', description: "Trimmed and lower-cased as a posted lead's." },
    mobile: { type: 'string', description: 'Any form libphonenumber reads; a bare 10-digit number is taken as US.' },
  },
} as const;

const validateLookup = new Ajv({ allErrors: true, strict: true }).compile(CONSUMER_LOOKUP_SCHEMA);

/** What the schema refuses, every field named; the contacts' formats are left to normaliseConsumer. */
function lookupErrors(body: Record<string, unknown>): FieldError[] {
  if (validateLookup(body)) return [];
  const errors = (validateLookup.errors ?? []).slice(0, 20);
  const unknown = errors.filter((error) => error.keyword === 'additionalProperties').map((error) => String((error.params as { additionalProperty: string }).additionalProperty));
  const wrongType = errors.filter((error) => error.keyword !== 'additionalProperties').map((error) => error.instancePath.slice(1));
  return [...unknownFields(unknown, 'a field of a consumer lookup'), ...wrongType.map((field) => ({ field, code: 'wrong_type', message: `${field} must be a string` }))];
}

function invalid(errors: FieldError[]): never {
  throw new ShellError('INVALID', {}, 'invalid consumer', oncePerField(errors));
}

export function registerErasureRoutes(router: Router<ShellState>, lookup: Authenticate, deps: ErasureRouteDeps, limits: { readonly read: Middleware<ShellState>; readonly write: Middleware<ShellState> }): void {
  // An erasure writes (and destroys keys): limited as posts are; the lookups and lists as reads.
  const admin = [authenticate(lookup), requireRole('admin'), limits.read];
  const adminWrites = [authenticate(lookup), requireRole('admin'), limits.write];

  router.post('/functions/erasures', ...adminWrites, requireJson(), async (ctx) => {
    const { body, repeated } = parseJsonBody(await readBody(ctx.req, deps.bodyBytes));
    const errors = [
      ...repeatedFields(repeated, (name) => ERASURE_FIELDS.includes(name)),
      ...unknownFields(Object.keys(body).filter((name) => !ERASURE_FIELDS.includes(name)).slice(0, 20), 'a field of an erasure'),
    ];
    if (body.suppress !== undefined && typeof body.suppress !== 'boolean') errors.push({ field: 'suppress', code: 'wrong_type', message: 'suppress must be boolean' });
    const checked = normaliseConsumer(body);
    if (!checked.ok) errors.push(...checked.errors);
    if (errors.length > 0 || !checked.ok) invalid(errors);
    const principal = ctx.state.principal!;
    const { created, erasure } = await deps.eraser.erase({
      ...checked.consumer,
      suppress: body.suppress === true,
      principal: `${principal.role}:${principal.name}`,
      traceId: ctx.state.traceId,
      actor: { role: principal.role, id: principal.name, key_id: principal.keyId },
    });
    ctx.status = created ? 201 : 200;
    ctx.set('Location', `/functions/erasures/${erasure.erasure_id}`);
    ctx.body = {
      ok: true,
      trace_id: ctx.state.traceId,
      code: 'OK',
      message: created ? `Consumer erased: ${erasure.leads_erased} lead(s).` : 'Already erased: nothing new to erase.',
      erasure,
    };
  });

  // The record of consumers' requests a business keeps: every request recorded for an erasure,
  // newest first, from the read models (one just made is in it once the answer to its POST has come).
  router.get('/functions/erasures', ...admin, async (ctx) => {
    await guarded(async () => ok(ctx, { ...(await deps.readBack.erasures(ctx.state.principal!, ctx.query)) }, deps.readBack));
  });

  router.get('/functions/erasures/:erasure_id', ...admin, async (ctx) => {
    const erasure = await deps.eraser.record(ctx.params.erasure_id ?? '');
    if (!erasure) throw new ShellError('NOT_FOUND');
    ctx.body = { ok: true, trace_id: ctx.state.traceId, code: 'OK', message: 'Erasure found.', erasure };
  });

  /** The consumer's leads, as the lead views with their personal data opened: the access answer. */
  const answerLookup = async (ctx: Context & { state: ShellState }, consumer: ConsumerQuery): Promise<void> => {
    const ids = await deps.leadIdsOf(consumer);
    const principal = ctx.state.principal!;
    const leads = (await Promise.all(ids.map((id) => deps.readBack.lead(principal, String(id))))).filter((lead) => lead !== null);
    ctx.body = {
      ok: true,
      trace_id: ctx.state.traceId,
      code: 'OK',
      message: `${leads.length} lead(s) of this consumer.`,
      leads_found: leads.length,
      items: leads,
      position: deps.readBack.position,
    };
  };

  router.post('/functions/consumers/lookup', ...admin, requireJson(), async (ctx) => {
    const { body, repeated } = parseJsonBody(await readBody(ctx.req, deps.bodyBytes));
    const errors = [...repeatedFields(repeated, (name) => Object.hasOwn(CONSUMER_LOOKUP_SCHEMA.properties, name)), ...lookupErrors(body)];
    // A field of the wrong type or length is named once, by the schema.
    const checked = normaliseConsumer(Object.fromEntries(Object.entries(body).filter(([field]) => !errors.some((e) => e.field === field))));
    if (!checked.ok) errors.push(...checked.errors.filter((e) => e.code !== 'required' || errors.length === 0));
    if (errors.length > 0 || !checked.ok) invalid(errors);
    await answerLookup(ctx, checked.consumer);
  });

  // Kept for compatibility: the contacts travel in the URL. POST /functions/consumers/lookup is the form to use.
  router.get('/functions/consumers', ...admin, async (ctx) => {
    const query: Record<string, unknown> = {};
    // An unknown parameter is named as a body's unknown member is: a contact sent as a name
    // (`?ada@example.com`, its `email=` forgotten) is not echoed, and a nameless one (`?=1`) is `*`.
    const errors: FieldError[] = unknownFields(Object.keys(ctx.query).filter((name) => name !== 'email' && name !== 'mobile').slice(0, 20), 'a query parameter here');
    for (const [name, value] of Object.entries(ctx.query)) {
      if (name !== 'email' && name !== 'mobile') continue;
      if (Array.isArray(value)) errors.push({ field: name, code: 'repeated', message: `${name} may be given once` });
      else query[name] = value;
    }
    const checked = normaliseConsumer(query);
    if (!checked.ok) errors.push(...checked.errors);
    if (errors.length > 0 || !checked.ok) invalid(errors);
    await answerLookup(ctx, checked.consumer);
  });
}
