import { SERVICE_ROLES, checkDirectories, loadServiceConfig } from '../config.js';
import { createLogger } from '../http/logger.js';
import { startService } from '../service.js';
import { releaseVersion } from '../version.js';
import { runBackupCommand } from './backup.js';
import { runDeliveriesCommand } from './deliveries.js';
import { runEventsCommand } from './events.js';
import { runConsumerCommand, runEraseCommand } from './erase.js';
import { runHealthCommand } from './health.js';
import { runKeysCommand } from './keys.js';
import { runMasterKeyCommand } from './master-key.js';
import { runInstancesCommand } from './instances.js';
import { runPruneBuildsCommand } from './prune-builds.js';
import { runReplayCommand } from './replay.js';
import { runRoutingCommand } from './routing.js';
import { runSealClearLeadsCommand } from './seal-clear-leads.js';
import { SERVE_USAGE } from './serve-help.js';

const USAGE = `usage: leadpost <command> [options]

commands:
  serve [--roles api,projector,delivery]  run the service (what \`npm start\` runs); --roles: what this
                                          process does (default all; see \`leadpost serve --help\`)
  keys create --role ROLE --name NAME [--force] [--json]
                                          create an API key (roles: supplier, buyer, analyst, admin;
                                          a buyer id must be in the routing file unless --force)
  keys list [--json]                      list keys (never the key itself)
  keys revoke ID                          revoke a key (takes effect within a second)
  keys rotate ID [--grace SECONDS] [--json]
                                          issue a replacement; the old key works until the grace ends
  events STREAM [--json]                  print a stream's events (e.g. lead-42) for inspection
  deliveries redeliver LEAD_ID [--reason CODE] [--json]
  deliveries redeliver --buyer BUYER_ID --failed-since ISO [--dry-run] [--reason CODE] [--json]
                                          send webhook deliveries that failed for good once more
  erase [--email E] [--mobile M] [--stdin] [--suppress] [--json]
                                          erase a consumer's personal data (every lead of it)
  consumer show [--email E] [--mobile M] [--stdin] [--json]
                                          a consumer's leads with personal data and outcomes
  replay [--projection NAME]              rebuild read models from the events, switch to them, and
                                          remove the builds older than the previous one
  prune-builds [--json]                   once no instance of an older release runs: remove the
                                          read-model builds of older projection versions
  seal-clear-leads [--json]               once, after upgrading from a release that kept leads' personal
                                          data in clear, with the service stopped: seal it, so it can be erased
  master-key rotate --to NEW_FILE [--json]
                                          with the service stopped: a new master key in NEW_FILE, and
                                          every data key and secret wrapped under it
  routing check [FILE] [--json]           check a routing file as serve and a reload (SIGHUP) do, and
                                          say what it holds, before it is put in force
  instances [--json]                      the instances running on this data dir, with the role
                                          leases each holds
  health [--ready] [--timeout MS]         ask the local service for /healthz (/readyz); exit 0 when 200
  backup --to DIR [--with-master-key] [--json]
                                          a consistent copy of the embedded stores, taken while the
                                          service runs
  help [COMMAND]                          this text, or a command's
  version                                 the release of this leadpost (also --version)

\`leadpost <command> --help\` or \`leadpost help <command>\` tells more. Every command reads the
same environment as the service: LEADPOST_DATA_DIR, EVENTSTORE_URL, MONGODB_URL (\`leadpost
serve --help\` lists the rest).`;

const SHUTDOWN_LIMIT_MS = 9_500;


/**
 * The exit status of a command whose reader went away (`leadpost keys list | head -1`): 141, that
 * is 128 + SIGPIPE, what a Unix tool killed by SIGPIPE exits with. Not 0: the output was cut short
 * (a new key may have been printed to no one), and a script with `set -o pipefail` should see that,
 * as it sees it for `yes | head -1`; a shell without pipefail ignores it, as for any tool.
 */
const CUT_SHORT = 141;

/** Set by the first write that failed: CUT_SHORT for a reader gone, 1 for any other failure. */
let outputLost: number | undefined;

/**
 * Node ignores SIGPIPE, so a write to a closed pipe fails with EPIPE, as an 'error' event that
 * nothing handled: a stack trace. Handled here for every command at once. From the first failed
 * write on, the command writes to no one, quietly (a destroyed stream drops later writes without
 * another event), and still finishes what it was doing: an erasure, a key change or a replay
 * stopped half-way would be worse than output no one reads.
 */
function stopQuietlyWhenOutputIsLost(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (error: NodeJS.ErrnoException) => {
      if (outputLost === undefined && error.code !== 'EPIPE' && stream === process.stdout) {
        process.stderr.write(`leadpost: cannot write the output (${error.code ?? error.message})\n`);
      }
      outputLost ??= error.code === 'EPIPE' ? CUT_SHORT : 1;
      // Also after main has returned: the last writes may fail only then.
      process.exitCode = outputLost;
    });
  }
}

/** Runs one CLI command; resolves to the process exit code. */
export async function main(args: string[]): Promise<number> {
  stopQuietlyWhenOutputIsLost();
  let code: number;
  try {
    code = await run(args);
  } catch (error) {
    // A bad setting (ConfigError, from whichever command read it), a bad routing file, a port taken:
    // the operator's to fix, so one line saying which, without a stack trace.
    console.error(`leadpost: ${error instanceof Error ? error.message : String(error)}`);
    code = 1;
  }
  return outputLost ?? code;
}

async function run(args: string[]): Promise<number> {
  const [command] = args;
  switch (command) {
    case 'serve':
      return args.includes('--help') || args.includes('-h') ? (console.log(SERVE_USAGE), 0) : serve(args.slice(1));
    case 'keys':
      return runKeysCommand(args.slice(1));
    case 'events':
      return runEventsCommand(args.slice(1));
    case 'deliveries':
      return runDeliveriesCommand(args.slice(1));
    case 'replay':
      return runReplayCommand(args.slice(1));
    case 'erase':
      return runEraseCommand(args.slice(1));
    case 'consumer':
      return runConsumerCommand(args.slice(1));
    case 'seal-clear-leads':
      return runSealClearLeadsCommand(args.slice(1));
    case 'master-key':
      return runMasterKeyCommand(args.slice(1));
    case 'health':
      return runHealthCommand(args.slice(1));
    case 'routing':
      return runRoutingCommand(args.slice(1));
    case 'instances':
      return runInstancesCommand(args.slice(1));
    case 'prune-builds':
      return runPruneBuildsCommand(args.slice(1));
    case 'backup':
      return runBackupCommand(args.slice(1));
    case 'help':
      // `leadpost help keys` is `leadpost keys --help`.
      return args[1] && args[1] !== 'help' ? run([args[1], '--help']) : (console.log(USAGE), 0);
    case '--help':
    case '-h':
      console.log(USAGE);
      return 0;
    case 'version':
    case '--version':
    case '-v':
      console.log(`leadpost ${releaseVersion()}`);
      return 0;
    case undefined:
      console.error(USAGE);
      return 2;
    default:
      // Not quoted back, as no bad argument is: a word typed in the wrong place may be a consumer's contact, and stderr goes to logs.
      console.error(`leadpost: unknown command: the commands are listed below\n\n${USAGE}`);
      return 2;
  }
}

/** `--roles LIST` or `--roles=LIST` overrides LEADPOST_ROLES; else what is wrong with serve's arguments (bad usage). */
function serveEnv(args: string[]): NodeJS.ProcessEnv | string {
  const ONLY_ROLES = 'serve takes only --roles LIST';
  let roles: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    // Given twice, one would be dropped unsaid (`--roles api --roles projector` ran no API): refused.
    if (roles !== undefined) return ONLY_ROLES;
    if (arg === '--roles' && args[i + 1] !== undefined && !args[i + 1]!.startsWith('--')) roles = args[++i];
    else if (arg.startsWith('--roles=')) roles = arg.slice('--roles='.length);
    else return ONLY_ROLES;
  }
  if (roles === undefined) return process.env;
  // Given empty or blank (`--roles=$ROLES` with the variable unset), it is no list, and not the
  // default either: taken for all three roles, it ran the projector and the delivery worker where
  // an API-only process was asked for, over the LEADPOST_ROLES the process was given.
  if (roles.trim() === '') return `serve --roles is given no role: it takes a comma-separated list of ${SERVICE_ROLES.join(', ')}`;
  return { ...process.env, LEADPOST_ROLES: roles };
}

async function serve(args: string[]): Promise<number> {
  const env = serveEnv(args);
  if (typeof env === 'string') {
    console.error(`leadpost: ${env}\n\n${SERVE_USAGE}`);
    return 2;
  }
  // Listen for the stop signal before anything starts: a SIGTERM that arrives while the service is
  // starting would otherwise find no handler and kill the process mid-way.
  const stopped = new Promise<void>((resolve) => {
    const stop = () => {
      // The contract is an exit within 10 s of the signal, however far start-up or the drain got.
      const overdue = setTimeout(() => {
        console.error('leadpost: stopping took longer than 10 s; exiting with work unfinished');
        process.exit(1);
      }, SHUTDOWN_LIMIT_MS);
      overdue.unref();
      resolve();
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  // SIGHUP reloads the routing file and the TLS certificate (src/ops/reload.ts). Listened for from
  // the start, like SIGTERM: Node's default would end the process at once, with no drain.
  let service: Awaited<ReturnType<typeof startService>> | undefined;
  let hupLogger: ReturnType<typeof createLogger> | undefined;
  process.on('SIGHUP', () => {
    if (service) {
      void service.reload();
      return;
    }
    try {
      hupLogger ??= createLogger({ env });
    } catch {
      return; // A bad LOG_LEVEL: start-up stops on it with its own message.
    }
    hupLogger.warn({ signal: 'SIGHUP' }, 'SIGHUP during start-up: nothing reloaded; send it again once leadpost is listening');
  });
  const config = loadServiceConfig(env);
  // Before anything makes the data dir: one that cannot be made is a bad setting like any other.
  checkDirectories(config);
  service = await startService(config);
  await stopped;
  await service.close();
  return 0;
}
