// `leadpost deliveries redeliver`: send webhook deliveries that failed for good once more, from the
// machine, as POST /functions/deliveries/{lead_id}/redeliver does over HTTP: one lead, or every
// lead of a buyer that failed for good since a moment (the buyer's outage began, its secret was
// rotated). Usage is checked before any store is opened.
import { randomBytes } from 'node:crypto';
import { loadRecordedConfig, routingFilePath } from '../config.js';
import { RedeliveryRefusedError, type RedeliveryRefusal } from '../delivery/attempt.js';
import { type RedeliveryOrigin, redeliverFailed, redeliveryErrors, requestRedelivery } from '../delivery/redeliver.js';
import { openEventStore } from '../event-store/index.js';
import { isKeyName } from '../keys/api-keys.js';
import { openPersonalDataKeys } from '../personal-data/index.js';
import { openReadModelStore } from '../read-models/index.js';
import { parseInstant } from '../read-models/report.js';
import { loadRoutingConfig } from '../routing/load-config.js';
import { commandProjections } from './command-projections.js';
import type { CliIo } from './io.js';
import { UsageError, readArgs } from './usage.js';

const USAGE = `usage: leadpost deliveries redeliver LEAD_ID [--reason CODE] [--json]
       leadpost deliveries redeliver --buyer BUYER_ID --failed-since ISO [--dry-run] [--reason CODE] [--json]

Sends a webhook delivery that failed for good (status failed) once more, once the buyer has fixed
its side: it is pending again, due at once, with a fresh round of the buyer's max_attempts. The
buyer gets the same Idempotency-Key (lead-<id>), so a copy it already has is dropped. For a lead
whose personal data was erased or expired, it is the lead.erased notice to the buyer that failed
for good (notice failed) that is sent again, the same way (Idempotency-Key lead-erased-<id>).
LEAD_ID: that lead. --buyer with --failed-since: every lead of that buyer whose last attempt
failed for good at or after that moment (an ISO 8601 date or time, e.g. 2026-11-21T08:00:00Z),
as the deliveries read model shows them (brought up to date first), and every lead.erased notice
to that buyer that failed for good, however long ago: the buyer keeps the erased consumer's data
until it takes it. A BUYER_ID the routing file (LEADPOST_ROUTING_FILE) does not have is refused
(exit 1), naming the ones it has. --dry-run: count them and send nothing. --reason: why, as a
snake_case code (secret_rotated, buyer_outage), recorded on the lead's stream. --json: one JSON
object.
A lead not failed for good, erased with no failed notice, or returned by the buyer is refused, and named.`;

/** Why a lead was not sent again, by what was refused: its delivery, or its lead.erased notice. */
const WHY: Readonly<Record<RedeliveryRefusal, string>> = {
  NOT_FOUND: 'no sold, non-test lead with that id',
  NOT_FAILED: 'its delivery has not failed for good (pending, under way or delivered)',
  DELIVERY_CANCELLED: "its personal data was erased or expired, and its buyer has no lead.erased notice: there is nothing left to send",
  ALREADY_RETURNED: 'the buyer returned it',
  BUYER_UNKNOWN: 'its buyer is not in the routing file in force: put it back first',
};
const NOTICE_WHY: Partial<Record<RedeliveryRefusal, string>> = {
  NOT_FAILED: 'its personal data is gone, and its lead.erased notice has not failed for good (sent, or still being sent)',
};
const why = ({ code, subject }: Pick<RedeliveryRefusedError, 'code' | 'subject'>): string => (subject === 'notice' ? NOTICE_WHY[code] : undefined) ?? WHY[code];

type Parsed = { leadId: number; reason: string | null; json: boolean } | { buyer: string; since: string; dryRun: boolean; reason: string | null; json: boolean };

function parse(args: string[]): Parsed | 'help' {
  const { values, positionals } = readArgs(
    args,
    {
      reason: { type: 'string' },
      buyer: { type: 'string' },
      'failed-since': { type: 'string' },
      'dry-run': { type: 'boolean' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    { positionals: true },
  );
  if (values.help) return 'help';
  const reason = typeof values.reason === 'string' ? values.reason : null;
  if (reason !== null && redeliveryErrors({ reason }).length > 0) throw new UsageError('--reason must be a snake_case code of 1–64 lowercase letters, digits and underscores, starting with a letter');
  const json = values.json === true;
  const buyer = values.buyer as string | undefined;
  const since = values['failed-since'] as string | undefined;
  if (positionals.length > 1) throw new UsageError('one LEAD_ID at a time; for many, give --buyer and --failed-since');
  if (positionals.length === 1) {
    if (buyer !== undefined || since !== undefined) throw new UsageError('give either LEAD_ID or --buyer with --failed-since, not both');
    // One lead is sent at once, by itself: the dry run is of the --buyer form's sweep only.
    if (values['dry-run']) throw new UsageError('--dry-run goes only with --buyer and --failed-since, not with a LEAD_ID');
    if (!/^[1-9]\d{0,15}$/.test(positionals[0]!)) throw new UsageError('LEAD_ID must be a lead id, a whole number from 1');
    return { leadId: Number(positionals[0]), reason, json };
  }
  if (buyer === undefined || since === undefined) throw new UsageError('give LEAD_ID, or --buyer with --failed-since');
  // Read as the API reads a time: one without an offset is UTC, whatever zone this machine is in.
  const at = parseInstant(since);
  if (at === null) throw new UsageError('--failed-since must be an ISO 8601 date or time (UTC unless it gives an offset), e.g. 2026-11-21T08:00:00Z');
  return { buyer, since: at, dryRun: values['dry-run'] === true, reason, json };
}

export async function runDeliveriesCommand(args: string[], io: CliIo = { out: process.stdout, err: process.stderr }, env = process.env): Promise<number> {
  if (args[0] !== 'redeliver') {
    if (args[0] === '--help' || args[0] === '-h') {
      io.out.write(`${USAGE}\n`);
      return 0;
    }
    // No subcommand is bad usage, as for keys and consumer: `leadpost deliveries $SUB` with SUB
    // empty must not pass for done in a script. A word given is not quoted: it may be anything pasted.
    io.err.write(`leadpost deliveries: ${args.length === 0 ? 'missing command: redeliver' : 'unknown command: the one command is redeliver'}\n\n${USAGE}\n`);
    return 2;
  }
  let parsed;
  try {
    parsed = parse(args.slice(1));
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.err.write(`leadpost deliveries redeliver: ${error.message}\n\n${USAGE}\n`);
    return 2;
  }
  if (parsed === 'help') {
    io.out.write(`${USAGE}\n`);
    return 0;
  }
  // The command line is a request of its own: a trace id of its own, and `cli` as who asked.
  const traceId = randomBytes(16).toString('hex');
  // The routing file the service reads: a buyer removed from it would never be sent the lead.
  const routingFile = routingFilePath(env);
  const buyers = loadRoutingConfig(routingFile).buyers;
  const buyerKnown = (buyer: string) => buyers.some((known) => known.id === buyer);
  // A --buyer the file does not have (a typo, another case) matches no row: the sweep would answer
  // "0 lead(s) redelivered", exit 0, and the buyer's failed leads would stay failed for good while
  // the operator believed it had none. Refused before any store is opened, naming the ids the file
  // has, as `keys create --role buyer` does; the value only when it reads as an id (not a contact
  // pasted into the wrong option).
  if ('buyer' in parsed && !buyerKnown(parsed.buyer)) {
    const known = buyers.length > 0 ? `the buyers are ${buyers.map((buyer) => buyer.id).join(', ')}` : 'it has no buyers';
    const given = isKeyName(parsed.buyer) ? `--buyer '${parsed.buyer}'` : '--buyer';
    io.err.write(`leadpost deliveries redeliver: ${given} is not a buyer of the routing file ${routingFile} (${known}): nothing was sent; a buyer taken out of the file must be put back in it first\n`);
    return 1;
  }
  const origin: RedeliveryOrigin = { principal: { role: 'cli', name: 'cli', keyId: null }, traceId, now: new Date(), reason: parsed.reason, buyerKnown };
  const config = loadRecordedConfig(env);
  const keys = await openPersonalDataKeys(config);
  const closers: Array<() => Promise<void>> = [() => keys.close()];
  try {
    const store = await openEventStore(config, { personalData: keys });
    closers.unshift(() => store.close());
    if ('leadId' in parsed) {
      try {
        const { type, data } = await requestRedelivery(store, parsed.leadId, origin);
        const notice = type === 'ErasureNoticeRedeliveryRequested';
        if (parsed.json) io.out.write(`${JSON.stringify({ ...data, reopened: notice ? 'notice' : 'delivery', trace_id: traceId })}\n`);
        else if (notice) io.out.write(`sending the lead.erased notice of lead ${data.lead_id} to ${data.buyer} again: round ${data.round}, pending, due now (trace ${traceId})\n`);
        else io.out.write(`redelivered lead ${data.lead_id} to ${data.buyer}: round ${data.round}, pending, due now (trace ${traceId})\n`);
        return 0;
      } catch (error) {
        if (!(error instanceof RedeliveryRefusedError)) throw error;
        if (parsed.json) io.out.write(`${JSON.stringify({ lead_id: parsed.leadId, refused: error.code, subject: error.subject })}\n`);
        io.err.write(`leadpost deliveries redeliver: lead ${parsed.leadId} not redelivered (${error.code}): ${why(error)}\n`);
        return 1;
      }
    }
    const readModels = await openReadModelStore(config);
    closers.unshift(() => readModels.close());
    const projections = await commandProjections(store, readModels, closers);
    await projections.waitFor(await store.headPosition());
    const sweep = await redeliverFailed({ store, readModels, deliveries: projections.collection('deliveries') }, parsed, origin);
    if (parsed.json) io.out.write(`${JSON.stringify({ ...sweep, dry_run: parsed.dryRun, trace_id: traceId })}\n`);
    else {
      const ids = (leads: number[]) => (leads.length > 0 ? `: ${leads.join(' ')}` : '');
      io.out.write(`${sweep.redelivered.length} lead(s) ${parsed.dryRun ? 'would be redelivered' : 'redelivered'} to ${parsed.buyer}${ids(sweep.redelivered)}\n`);
      io.out.write(`${sweep.notices.length} lead.erased notice(s) ${parsed.dryRun ? 'would be sent again' : 'sent again'} to ${parsed.buyer}${ids(sweep.notices)}\n`);
      for (const refusal of sweep.refused) io.out.write(`lead ${refusal.lead_id} ${parsed.dryRun ? 'would not be' : 'not'} redelivered (${refusal.code}): ${why(refusal)}\n`);
    }
    return 0;
  } finally {
    for (const close of closers) await close();
  }
}
