// `leadpost keys …`: manage API keys in the event store the service reads. Usage is checked before
// the store is opened, so a typo never creates a data dir or waits on a server.
import { ConfigError, keyRotationGraceSeconds, loadConfig, loadRecordedConfig, routingFilePath } from '../config.js';
import { type EventStore, openEventStore } from '../event-store/index.js';
import {
  formatKey,
  isKeyId,
  isKeyName,
  isRole,
  issueKey,
  KeyCommandError,
  MAX_GRACE_SECONDS,
  type KeyRecord,
  keyStatus,
  newKeyMaterial,
  revokeKey,
  ROLES,
  rotateKey,
} from '../keys/api-keys.js';
import { changeKeys, loadKeys } from '../keys/key-stream.js';
import { loadRoutingConfig } from '../routing/load-config.js';
import type { CliIo } from './io.js';
import { UsageError, readArgs, wholeNumberOption } from './usage.js';


const USAGE = `usage: leadpost keys <command>

commands:
  create --role ROLE --name NAME [--force] [--json]
                                           issue a key; ROLE is ${ROLES.join('|')};
                                           NAME is the principal (supplier id, buyer id):
                                           1-64 of A-Z a-z 0-9 . _ -; a buyer id must be
                                           in the routing file (LEADPOST_ROUTING_FILE,
                                           default config/routing.json) unless --force
  list [--json]                            every key: id, role, name, status, issued_at
  revoke ID                                stop a key at once
  rotate ID [--grace SECONDS] [--json]     issue a replacement; the old key keeps working for the
                                           grace period: 0 to 31536000 seconds (a year), default
                                           KEY_ROTATION_GRACE_SECONDS or 86400

A new key is printed once and never again: only a hash of it is stored.
Running services pick up every change within a second.
`;

type Command =
  | { readonly kind: 'help' }
  | { readonly kind: 'create'; readonly role: string; readonly name: string; readonly force: boolean; readonly json: boolean }
  | { readonly kind: 'list'; readonly json: boolean }
  | { readonly kind: 'revoke'; readonly id: string }
  | { readonly kind: 'rotate'; readonly id: string; readonly grace: number; readonly json: boolean };

const FLAGS = {
  create: { role: { type: 'string' }, name: { type: 'string' }, force: { type: 'boolean' }, json: { type: 'boolean' } },
  list: { json: { type: 'boolean' } },
  revoke: {},
  rotate: { grace: { type: 'string' }, json: { type: 'boolean' } },
} as const;

/** Runs `keys <args>` (args exclude the word `keys`); resolves to the exit code: 0 ok, 2 usage, 1 failure. */
export async function runKeysCommand(args: string[], io: CliIo = { out: process.stdout, err: process.stderr }, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let command: Command;
  try {
    command = parse(args, env);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    // Bad usage is one line, then the usage, as for every command (the README's exit codes).
    io.err.write(`leadpost keys: ${error.message}\n\n${USAGE}`);
    return 2;
  }
  if (command.kind === 'help') {
    io.out.write(USAGE);
    return 0;
  }
  let store: EventStore | undefined;
  try {
    if (command.kind === 'create' && command.role === 'buyer' && !command.force) checkBuyerId(command.name, env);
    store = await openEventStore(command.kind === 'create' ? loadConfig(env) : loadRecordedConfig(env));
    await execute(command, store, io);
    return 0;
  } catch (error) {
    // A bad variable is reported as serve reports it, by the CLI's entry point.
    if (error instanceof ConfigError) throw error;
    const usage = error instanceof KeyCommandError && error.kind === 'invalid';
    io.err.write(`leadpost keys: ${error instanceof Error ? error.message : String(error)}\n${usage ? `\n${USAGE}` : ''}`);
    return usage ? 2 : 1;
  } finally {
    await store?.close().catch(() => {});
  }
}

// A problem is said by the option or argument at fault, never quoting what was given: a value
// pasted in the wrong place may be a consumer's e-mail or mobile, and stderr goes to logs.
function parse(args: string[], env: NodeJS.ProcessEnv): Command {
  const [sub, ...rest] = args;
  if (sub === undefined) throw new UsageError('missing command (create, list, revoke or rotate)');
  if (sub === '--help' || sub === '-h' || sub === 'help') return { kind: 'help' };
  if (!Object.hasOwn(FLAGS, sub)) throw new UsageError('unknown command: the commands are create, list, revoke and rotate');
  const kind = sub as keyof typeof FLAGS;
  const { values, positionals } = readArgs(rest, { ...FLAGS[kind], help: { type: 'boolean', short: 'h' } }, { positionals: true });
  if (values.help) return { kind: 'help' };
  const json = values.json === true;
  if (kind === 'create' || kind === 'list') {
    if (positionals.length > 0) throw new UsageError(`${kind} takes no argument besides its options`);
  } else if (positionals.length !== 1) {
    throw new UsageError(`${kind} takes exactly one key ID`);
  }
  switch (kind) {
    case 'create': {
      const role = values.role as string | undefined;
      const name = values.name as string | undefined;
      if (role === undefined) throw new UsageError('create needs --role');
      if (!isRole(role)) throw new UsageError(`--role must be one of ${ROLES.join(', ')}`);
      if (name === undefined) throw new UsageError('create needs --name');
      if (!isKeyName(name)) throw new UsageError('--name must be 1-64 characters of A-Z a-z 0-9 . _ -');
      return { kind, role, name, force: values.force === true, json };
    }
    case 'list':
      return { kind, json };
    case 'revoke':
      return { kind, id: keyId(positionals[0]!) };
    case 'rotate':
      return { kind, id: keyId(positionals[0]!), grace: grace(values.grace as string | undefined, env), json };
  }
}

/**
 * A buyer key acts for the buyer of that id in the routing file: a typo would make a key that can
 * read nothing and may not send feedback, silently. Checked before the store is opened, so a
 * refused name leaves no trace; --force is for a buyer about to be added to the file.
 */
function checkBuyerId(name: string, env: NodeJS.ProcessEnv): void {
  const file = routingFilePath(env);
  let buyers: string[];
  try {
    buyers = loadRoutingConfig(file).buyers.map((buyer) => buyer.id);
  } catch (error) {
    throw new Error(`cannot check the buyer id against the routing file (${(error as Error).message}); fix it, or pass --force to create the key anyway`);
  }
  if (!buyers.includes(name)) {
    const known = buyers.length > 0 ? `the buyers are ${buyers.join(', ')}` : 'it has no buyers';
    throw new Error(`no buyer '${name}' in the routing file ${file} (${known}); pass --force to create the key anyway`);
  }
}

function keyId(text: string): string {
  // Someone will paste the whole key; say so without echoing the secret back to the terminal.
  if (text.startsWith('lp_')) throw new UsageError("pass the key's ID (the 12 characters after 'lp_'), not the key itself");
  if (!isKeyId(text)) throw new UsageError('ID must be a key ID (12 lower-case letters or digits)');
  return text;
}

// --grace as every whole-number option is checked; without it KEY_ROTATION_GRACE_SECONDS, read
// where serve reads it, so that both refuse a bad value in the same words: here before the store
// is opened, as bad usage (exit 2) like a bad --grace.
function grace(flag: string | undefined, env: NodeJS.ProcessEnv): number {
  if (flag !== undefined) return wholeNumberOption('--grace', flag, 0, MAX_GRACE_SECONDS, 'seconds');
  try {
    return keyRotationGraceSeconds(env);
  } catch (error) {
    throw error instanceof ConfigError ? new UsageError(error.message) : error;
  }
}

const line = (io: CliIo, text = ''): unknown => io.out.write(`${text}\n`);
const WARNING = 'Store this key now: it will not be shown again (only its hash is kept).';

async function execute(command: Exclude<Command, { kind: 'help' }>, store: EventStore, io: CliIo): Promise<void> {
  const now = Date.now();
  switch (command.kind) {
    case 'create': {
      const { id, secret } = newKeyMaterial();
      await changeKeys(store, (state) => issueKey(state, { role: command.role, name: command.name, now, id, secret }));
      const key = formatKey(id, secret);
      if (command.json) {
        line(io, JSON.stringify({ id, key, role: command.role, name: command.name }));
        io.err.write(`${WARNING}\n`);
      } else {
        line(io, `Created ${command.role} key ${id} for ${command.name}:`);
        line(io, `\n  ${key}\n`);
        line(io, WARNING);
      }
      return;
    }
    case 'list':
      return list((await loadKeys(store)).state.values(), now, command.json, io);
    case 'revoke': {
      const { events, state } = await changeKeys(store, (s) => revokeKey(s, { id: command.id, now }));
      const record = state.get(command.id)!;
      line(io, events.length > 0 ? `Revoked ${record.role} key ${record.id} for ${record.name}.` : `Key ${record.id} was already revoked.`);
      return;
    }
    case 'rotate': {
      const { id: newId, secret } = newKeyMaterial();
      const { state } = await changeKeys(store, (s) => rotateKey(s, { id: command.id, now, graceSeconds: command.grace, newId, newSecret: secret }));
      const old = state.get(command.id)!;
      const key = formatKey(newId, secret);
      if (command.json) {
        line(io, JSON.stringify({ id: newId, key, role: old.role, name: old.name, replaces: old.id }));
        io.err.write(`${WARNING}\n`);
      } else {
        line(io, `Rotated key ${old.id}: new ${old.role} key ${newId} for ${old.name}:`);
        line(io, `\n  ${key}\n`);
        line(io, `Key ${old.id} keeps working until ${old.expires_at}, then stops.`);
        line(io, WARNING);
      }
    }
  }
}

function list(records: Iterable<KeyRecord>, now: number, json: boolean, io: CliIo): void {
  // Built field by field so the hash can never slip into the output.
  const rows = [...records].map((r) => ({
    id: r.id,
    role: r.role,
    name: r.name,
    status: keyStatus(r, now),
    issued_at: r.issued_at,
    expires_at: r.expires_at,
    revoked_at: r.revoked_at,
    replaced_by: r.replaced_by,
  }));
  if (json) {
    line(io, JSON.stringify(rows));
    return;
  }
  if (rows.length === 0) {
    line(io, 'No keys.');
    return;
  }
  const table = [['ID', 'ROLE', 'NAME', 'STATUS', 'ISSUED_AT', 'EXPIRES_AT'], ...rows.map((r) => [r.id, r.role, r.name, r.status, r.issued_at, r.expires_at ?? ''])];
  const widths = table[0]!.map((_, column) => Math.max(...table.map((row) => row[column]!.length)));
  for (const row of table) line(io, row.map((cell, column) => cell.padEnd(widths[column]!)).join('  ').trimEnd());
}
