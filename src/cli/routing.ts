// `leadpost routing check [FILE]`: checks a routing file as `serve` and a reload (SIGHUP) do, before
// it is copied to the instances, and says what it holds in words: an operator who edits a cap or
// pauses a buyer sees that the file says what they meant, and the version that `LeadRouted` and
// `leadpost_routing_info` will show once it is in force.

import { routingFilePath } from '../config.js';
import { type Buyer, type LoadedRoutingConfig, loadRoutingConfig, RoutingConfigError } from '../routing/load-config.js';
import { unsetSecrets } from '../routing/unset-secrets.js';
import type { CliIo } from './io.js';
import { UsageError, readArgs } from './usage.js';

const USAGE = `usage: leadpost routing check [FILE] [--json]

Checks a routing file as the service does at start and on SIGHUP (FILE, else LEADPOST_ROUTING_FILE,
else config/routing.json) and prints its version and what it holds: each buyer's price, filters,
caps, hours and delivery, and the buckets. Exit 0 when the file loads (a buyer whose secret_env is
not set in this environment is named as a warning), 1 with every problem when it does not, 2 on a
usage mistake. --json prints the file as the service reads it, defaults applied, with "valid":
true, or {"source","valid":false,"problems":[{"path","message"}]}.`;

export async function runRoutingCommand(args: string[], io: CliIo = { out: process.stdout, err: process.stderr }, env = process.env): Promise<number> {
  let values;
  let positionals: string[];
  try {
    ({ values, positionals } = readArgs(args, { json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } }, { positionals: true }));
    if (!values.help && positionals[0] !== 'check') throw new UsageError(positionals[0] === undefined ? 'which subcommand? (check)' : 'unknown subcommand: the one subcommand is check');
    if (positionals.length > 2) throw new UsageError(`one file at most, not ${positionals.length - 1}`);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.err.write(`leadpost routing: ${error.message}\n\n${USAGE}\n`);
    return 2;
  }
  if (values.help) {
    io.out.write(`${USAGE}\n`);
    return 0;
  }
  const file = positionals[1] ?? routingFilePath(env);
  let routing: LoadedRoutingConfig;
  try {
    routing = loadRoutingConfig(file);
  } catch (error) {
    if (!(error instanceof RoutingConfigError)) throw error;
    // For a pipeline that checks the file before it is copied out: each problem by its path in the file.
    if (values.json) io.out.write(`${JSON.stringify({ source: file, valid: false, problems: error.problems })}\n`);
    io.err.write(`leadpost routing check: ${file} does not load (${error.problems.length} ${error.problems.length === 1 ? 'problem' : 'problems'}):\n${error.message}\n`);
    return 1;
  }
  const unset = unsetSecrets(routing, env);
  if (values.json) {
    io.out.write(`${JSON.stringify({ valid: true, ...routing, unset_secrets: unset })}\n`);
  } else {
    io.out.write(`${describe(routing)}\n`);
  }
  for (const { buyer, secret_env, unsigned } of unset) {
    io.err.write(`warning: buyer ${buyer}: secret_env ${secret_env} is not set here, so its ${unsigned.join(' and ')} would go unsigned\n`);
  }
  return 0;
}

function describe(routing: LoadedRoutingConfig): string {
  const lines = [
    `${routing.source}: version ${routing.version}`,
    `${routing.currency}, strategy ${routing.strategy}, duplicate window ${routing.duplicate_window_days} days, minimum bid ${routing.min_bid}`,
    `buyers (${routing.buyers.length}):`,
    ...routing.buyers.map((buyer) => `  ${buyerLine(buyer, routing.currency)}`),
    `buckets (${routing.buckets.length}):`,
    ...routing.buckets.map((bucket) => `  ${[bucket.id, bucket.default ? 'default' : null, filters(bucket)].filter(Boolean).join(', ')}`),
  ];
  return lines.join('\n');
}

function buyerLine(buyer: Buyer, currency: string): string {
  const parts = [
    `${buyer.id}${buyer.name !== buyer.id ? ` (${buyer.name})` : ''}: ${buyer.price} ${currency}, priority ${buyer.priority}`,
    buyer.active ? null : 'PAUSED (active: false)',
    filters(buyer),
    Object.entries(buyer.require).map(([check, requirement]) => `${check} ${requirement}`).join(', ') || null,
    buyer.caps.map((cap) => `at most ${cap.max} per ${cap.period} (${cap.tz})`).join(', ') || null,
    buyer.hours ? `${buyer.hours.days.join(',')} ${buyer.hours.start}–${buyer.hours.end} (${buyer.hours.tz})` : null,
    buyer.delivery.kind === 'webhook' ? `webhook ${buyer.delivery.url}, ${buyer.delivery.max_attempts} attempts` : 'pull',
    buyer.ping ? `bids on pings (${buyer.ping.kind})` : null,
    buyer.return_reasons.length > 0 ? `returns within ${buyer.return_window_days} days` : null,
  ];
  return parts.filter(Boolean).join('; ');
}

function filters(entry: { readonly states: readonly string[] | null; readonly zip_prefixes: readonly string[] | null }): string | null {
  const said = [entry.states ? `states ${entry.states.join(',')}` : null, entry.zip_prefixes ? `ZIPs ${entry.zip_prefixes.join(',')}…` : null];
  return said.filter(Boolean).join(', ') || null;
}
