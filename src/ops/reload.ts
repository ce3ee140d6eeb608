// What a running service takes again without a restart (SIGHUP): the routing file, which a lead
// business edits several times a day (a buyer paused, a cap raised, a price changed), and the TLS
// certificate, which is renewed every few weeks. A restart would drop the connections of a
// single-instance deployment for as long as it takes to start. Everything else (the environment,
// the stores) is read at start only.
//
// A file that does not load leaves what is in force untouched: a typo in an edit must not take
// routing or TLS away from a serving instance. The operator reads why in the log (and sees the
// routing version unchanged on /metrics).

import { type Stats, unwatchFile, watchFile } from 'node:fs';
import type { Logger } from 'pino';
import type { TlsMaterial } from '../http/tls.js';
import { type LoadedRoutingConfig, loadRoutingConfig } from '../routing/load-config.js';
import { warnOfUnsetSecrets } from '../routing/unset-secrets.js';

export interface ReloadResult {
  /** The routing in force after the reload, and whether it is a new one; or why the file was refused. */
  readonly routing: { readonly version: string; readonly changed: boolean } | { readonly refused: string };
  /** Whether new connections get a new certificate; or why the files were refused. */
  readonly tls: { readonly changed: boolean } | { readonly refused: string };
}

export interface ReloadDeps {
  readonly routingFile: string;
  readonly routing: () => LoadedRoutingConfig;
  readonly applyRouting: (routing: LoadedRoutingConfig) => void;
  readonly tls: () => TlsMaterial;
  /** The certificate files (or the self-signed pair in the data dir, renewed when it is due) read again. */
  readonly loadTls: () => Promise<TlsMaterial>;
  readonly applyTls: (tls: TlsMaterial) => void;
  readonly env: NodeJS.ProcessEnv;
  readonly logger: Logger;
}

/** Reloads in turn: a second signal while one reload runs waits for it, so the last file read wins. */
export function settingsReloader(deps: ReloadDeps): () => Promise<ReloadResult> {
  let last: Promise<unknown> = Promise.resolve();
  return () => {
    const next = last.then(() => reload(deps));
    last = next.catch(() => undefined);
    return next;
  };
}

async function reload(deps: ReloadDeps): Promise<ReloadResult> {
  return { routing: reloadRouting(deps), tls: await reloadTls(deps) };
}

function reloadRouting(deps: ReloadDeps): ReloadResult['routing'] {
  const { logger } = deps;
  const inForce = deps.routing();
  let loaded: LoadedRoutingConfig;
  try {
    loaded = loadRoutingConfig(deps.routingFile);
  } catch (error) {
    // The loader's message names the file and each problem by its path in the file, never by a
    // value: whatever was copied in the file's place (a leads export, a secret pasted into
    // secret_env), the log gets no consumer's data and no secret, and at most 50 short lines.
    const refused = (error as Error).message;
    logger.error({ routing_version: inForce.version }, `routing file not reloaded, the routing in force stays: ${refused}`);
    return { refused };
  }
  if (loaded.version === inForce.version) {
    logger.info({ routing_version: inForce.version }, 'routing file unchanged');
    return { version: inForce.version, changed: false };
  }
  deps.applyRouting(loaded);
  warnOfUnsetSecrets(loaded, deps.env, logger);
  logger.info(
    { routing_version: loaded.version, previous_routing_version: inForce.version, buyers: loaded.buyers.length, buckets: loaded.buckets.length },
    'routing file reloaded: leads and pings from now on are routed by it',
  );
  return { version: loaded.version, changed: true };
}

async function reloadTls(deps: ReloadDeps): Promise<ReloadResult['tls']> {
  const { logger } = deps;
  let loaded: TlsMaterial;
  try {
    loaded = await deps.loadTls();
  } catch (error) {
    const refused = (error as Error).message;
    logger.error(`TLS certificate not reloaded, the certificate in force stays: ${refused}`);
    return { refused };
  }
  const inForce = deps.tls();
  if (loaded.cert === inForce.cert && loaded.key === inForce.key) return { changed: false };
  try {
    deps.applyTls(loaded);
  } catch (error) {
    // The pair was checked as it was read; a context Node still refuses leaves the old one serving.
    const refused = (error as Error).message;
    logger.error(`TLS certificate not reloaded, the certificate in force stays: ${refused}`);
    return { refused };
  }
  logger.info({ self_signed: loaded.selfSigned }, 'TLS certificate reloaded: new connections get it');
  return { changed: true };
}

/**
 * Reloads when the routing file changes (LEADPOST_ROUTING_WATCH_SECONDS): with many instances,
 * the edit that configuration management copies to each machine (or a mounted file it swaps) is
 * taken by every instance within that time, with no signal to send to each. The file is looked
 * at by its metadata every `intervalSeconds` (a poll, which also sees a symbolic link pointed at
 * a new file); a change runs the same reload as SIGHUP, in turn with it, so an edit that does not
 * load changes nothing and is logged. Returns what stops the watch.
 */
export function watchRoutingFile(file: string, intervalSeconds: number, reload: () => Promise<unknown>, logger: Logger, versionInForce: () => string): () => void {
  const reloadBecause = (why: string) => {
    logger.info({ file }, why);
    reload().catch((error: unknown) => logger.error({ err: error }, 'routing file not reloaded'));
  };
  const changed = (current: Stats, previous: Stats) => {
    if (current.mtimeMs === previous.mtimeMs && current.size === previous.size && current.ino === previous.ino) return;
    reloadBecause('routing file changed: reloading it');
  };
  watchFile(file, { interval: intervalSeconds * 1000, persistent: false }, changed);
  // The watch compares with the file as it first finds it: an edit made since the service read the
  // file at start would be that baseline, and never taken. So the file as it is now is compared
  // with the routing in force once, and taken (or refused, and said so) when it differs.
  let now: string | null;
  try {
    now = loadRoutingConfig(file).version;
  } catch {
    now = null;
  }
  if (now !== versionInForce()) reloadBecause('routing file changed while the service started: reloading it');
  return () => unwatchFile(file, changed);
}
