// `leadpost erase` and `leadpost consumer show`: a consumer's erasure and access requests from the
// machine, as POST /functions/erasures and POST /functions/consumers/lookup answer them over HTTP. Usage
// is checked before any store is opened; neither value is ever printed.
import { causeChain } from '../error-causes.js';
import { join } from 'node:path';
import { ContactRegistry } from '../commands/contacts.js';
import { ConsumerEraser, consumerLeadIds } from '../commands/erasure.js';
import { loadRecordedConfig, routingFilePath } from '../config.js';
import { openEventStore } from '../event-store/index.js';
import { unknownField } from '../leads/outcome.js';
import { type ConsumerQuery, normaliseConsumer } from '../leads/validate.js';
import { ContactHashes } from '../personal-data/contact-hashes.js';
import { openPersonalDataKeys } from '../personal-data/index.js';
import { KEYS_FILE } from '../personal-data/embedded-key-store.js';
import { isBusy } from '../sqlite-busy.js';
import { openReadModelStore } from '../read-models/index.js';
import { ReadBack } from '../read-models/read-back.js';
import { type LoadedRoutingConfig, loadRoutingConfig } from '../routing/load-config.js';
import { commandProjections } from './command-projections.js';
import type { Projections } from '../projections/index.js';
import type { CliIo } from './io.js';
import { UsageError, readArgs } from './usage.js';

const STDIN_USAGE = `--stdin: the e-mail and mobile are read from standard input, as one JSON object
{"email": …, "mobile": …}, instead of --email and --mobile: a command line is seen by every user
of the machine (ps) and kept in the shell's history.`;

const ERASE_USAGE = `usage: leadpost erase [--email E] [--mobile M] [--stdin] [--suppress] [--json]

Erases a consumer's personal data: every lead with that e-mail or mobile (sold, rejected, test)
loses its data key for good; outcomes and reports stay. At least one of --email and --mobile,
normalised as a posted lead's (a bare 10-digit mobile is taken as US). --suppress: later leads
with that mobile or e-mail are rejected SUPPRESSED. Asking again continues the same erasure.
Brings the read models up to date first, so it may run beside the service or alone.
${STDIN_USAGE}
--json: the erasure record as one JSON object.`;

const SHOW_USAGE = `usage: leadpost consumer show [--email E] [--mobile M] [--stdin] [--json]

Prints every lead of a consumer (by e-mail or mobile) with its personal data and outcome: the
answer to an access request.
${STDIN_USAGE}
--json: one JSON object per lead.`;

async function parse(args: string[], suppress: boolean, io: CliIo): Promise<{ consumer: ConsumerQuery; suppress: boolean; json: boolean } | 'help'> {
  const { values } = readArgs(
    args,
    {
      email: { type: 'string' },
      mobile: { type: 'string' },
      stdin: { type: 'boolean' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
      ...(suppress ? { suppress: { type: 'boolean' } } : {}),
    },
    { withoutOption: 'an argument without its option: give the e-mail as --email E and the mobile as --mobile M' },
  );
  if (values.help) return 'help';
  if (values.stdin && (values.email !== undefined || values.mobile !== undefined)) throw new UsageError('--stdin takes the e-mail and mobile from standard input: give neither --email nor --mobile with it');
  const checked = normaliseConsumer(values.stdin ? await contactsFrom(io.in ?? process.stdin) : { email: values.email as string | undefined, mobile: values.mobile as string | undefined });
  if (!checked.ok) {
    if (checked.errors.every((e) => e.code === 'required')) throw new UsageError(values.stdin ? '--stdin: "email" or "mobile" is required' : '--email or --mobile is required');
    throw new UsageError(checked.errors.map((e) => (values.stdin ? `--stdin: ${e.message}` : e.message.replace(/\b(email|mobile)\b/g, '--$1'))).join('; '));
  }
  return { consumer: checked.consumer, suppress: values.suppress === true, json: values.json === true };
}

/** The contacts of `--stdin`; what is wrong with them is said without a word of what was sent. */
async function contactsFrom(input: AsyncIterable<string | Buffer>): Promise<Record<string, unknown>> {
  let text = '';
  for await (const chunk of input) text += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    // Refused below in words of its own: JSON.parse's message quotes the text, the very contacts.
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new UsageError('--stdin takes one JSON object, {"email": …, "mobile": …}');
  const unknown = Object.keys(body).filter((name) => name !== 'email' && name !== 'mobile');
  if (unknown.length > 0) throw new UsageError(`--stdin: ${unknownField(unknown[0]!, 'a field of a consumer: give "email" and "mobile" only').message}`);
  return body as Record<string, unknown>;
}

/** The SQLite lock wait that ran out, anywhere in the error's causes; undefined when none did. */
function lockedIn(error: unknown): Error | undefined {
  for (const current of causeChain(error)) if (isBusy(current)) return current;
  return undefined;
}

/** The stores, the projections brought up to date, and what the two commands need of them. */
async function withService<T>(env: NodeJS.ProcessEnv, run: (parts: { eraser: ConsumerEraser; leadIds: (c: ConsumerQuery) => Promise<number[]>; readBack: ReadBack }) => Promise<T>): Promise<T> {
  const config = loadRecordedConfig(env);
  const keys = await openPersonalDataKeys(config);
  const closers: Array<() => Promise<void>> = [() => keys.close()];
  try {
    const store = await openEventStore(config, { personalData: keys });
    closers.unshift(() => store.close());
    const hashes = await ContactHashes.open(keys, store);
    const readModels = await openReadModelStore(config);
    closers.unshift(() => readModels.close());
    const projections = await commandProjections(store, readModels, closers);
    const now = () => new Date();
    const consumerLeads = { store, readModels, leads: () => projections.collection('leads'), caughtUp: (p: Parameters<Projections['waitFor']>[0]) => projections.waitFor(p) };
    const eraser = new ConsumerEraser({ ...consumerLeads, keys, hashes, contacts: new ContactRegistry(store, hashes), now });
    // The routing file is read when a lead is shown (its currency), as the service reads it; erasing needs none.
    let routing: LoadedRoutingConfig | undefined;
    const readBack = new ReadBack({
      events: store,
      personalData: keys,
      readModels,
      collection: (base) => projections.collection(base),
      position: () => projections.position(),
      routing: () => (routing ??= loadRoutingConfig(routingFilePath(env))),
    });
    return await run({ eraser, leadIds: (consumer) => consumerLeadIds(consumerLeads, eraser.contactsOf(consumer)), readBack });
  } catch (error) {
    // keys.db held locked by another process past a write's wait (an erasure destroys keys; a
    // first run makes the contacts' hashing secret): SQLite's bare 'database is locked' named no file.
    const busy = lockedIn(error);
    throw busy ? new Error(`${join(config.dataDir, KEYS_FILE)} is locked by another process (${busy.message}): try again once it is free`, { cause: error }) : error;
  } finally {
    for (const close of closers) await close();
  }
}

export async function runEraseCommand(args: string[], io: CliIo = { out: process.stdout, err: process.stderr }, env = process.env): Promise<number> {
  let parsed;
  try {
    parsed = await parse(args, true, io);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.err.write(`leadpost erase: ${error.message}\n\n${ERASE_USAGE}\n`);
    return 2;
  }
  if (parsed === 'help') {
    io.out.write(`${ERASE_USAGE}\n`);
    return 0;
  }
  const { consumer, suppress, json } = parsed;
  const { created, erasure } = await withService(env, ({ eraser }) => eraser.erase({ ...consumer, suppress, principal: 'cli' }));
  if (json) io.out.write(`${JSON.stringify({ created, ...erasure })}\n`);
  else {
    io.out.write(`${created ? 'erased' : 'already erased, nothing new'}: erasure ${erasure.erasure_id}, ${erasure.leads_erased} lead(s)${erasure.suppressed ? ', suppressed' : ''}\n`);
    if (erasure.lead_ids.length > 0) io.out.write(`leads: ${erasure.lead_ids.join(' ')}\n`);
  }
  return 0;
}

export async function runConsumerCommand(args: string[], io: CliIo = { out: process.stdout, err: process.stderr }, env = process.env): Promise<number> {
  if (args[0] !== 'show') {
    if (args[0] === '--help' || args[0] === '-h') {
      io.out.write(`${SHOW_USAGE}\n`);
      return 0;
    }
    // Bad usage as for every command: a line saying what is wrong (never the word given: it may be
    // the very e-mail address), the usage, exit 2.
    const problem = args[0] === undefined || args[0].startsWith('-') ? 'missing command: show' : 'unknown command: the one command is show';
    io.err.write(`leadpost consumer: ${problem}\n\n${SHOW_USAGE}\n`);
    return 2;
  }
  let parsed;
  try {
    parsed = await parse(args.slice(1), false, io);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.err.write(`leadpost consumer show: ${error.message}\n\n${SHOW_USAGE}\n`);
    return 2;
  }
  if (parsed === 'help') {
    io.out.write(`${SHOW_USAGE}\n`);
    return 0;
  }
  const { consumer, json } = parsed;
  const leads = await withService(env, async ({ leadIds, readBack }) => {
    const principal = { role: 'admin' as const, name: 'cli', keyId: 'cli' };
    const rows = await Promise.all((await leadIds(consumer)).map((id) => readBack.lead(principal, String(id))));
    return rows.filter((row) => row !== null);
  });
  for (const lead of leads) {
    if (json) io.out.write(`${JSON.stringify(lead)}\n`);
    else io.out.write(`lead ${String(lead.lead_id)} ${String(lead.received_at)} ${String(lead.code)} ${lead.buyer ? `buyer ${String(lead.buyer)} ` : ''}${JSON.stringify(lead.lead)}\n`);
  }
  if (!json) io.out.write(`${leads.length} lead(s)\n`);
  return 0;
}
