// A buyer's `secret_env` names the variable its deliveries and bid requests are signed with. One
// that is not set (or set empty) signs nothing: the buyer then gets unsigned requests, which it
// rejects or, worse, takes unchecked, and nothing else says why. So the service says it once at
// start, naming the buyer and the variable; a variable's value is never read into a message.
import type { Logger } from 'pino';
import type { RoutingConfig } from './load-config.js';

type Signed = 'deliveries' | 'pings';

interface UnsetSecret {
  readonly buyer: string;
  readonly secret_env: string;
  /** What goes unsigned for want of it. */
  readonly unsigned: readonly Signed[];
}

/** Every buyer and variable its `secret_env` names that is not set in `env`, in file order. */
export function unsetSecrets(config: Pick<RoutingConfig, 'buyers'>, env: NodeJS.ProcessEnv): UnsetSecret[] {
  return config.buyers.flatMap((buyer) => {
    const named: Array<[Signed, string | null]> = [
      ['deliveries', buyer.delivery.kind === 'webhook' ? buyer.delivery.secret_env : null],
      ['pings', buyer.ping?.kind === 'webhook' ? buyer.ping.secret_env : null],
    ];
    const byVariable = new Map<string, Signed[]>();
    for (const [signed, variable] of named) {
      if (variable === null || env[variable]) continue;
      byVariable.set(variable, [...(byVariable.get(variable) ?? []), signed]);
    }
    return [...byVariable].map(([secret_env, unsigned]) => ({ buyer: buyer.id, secret_env, unsigned }));
  });
}

/** One warning per buyer and unset variable; called once the routing file is loaded at start. */
export function warnOfUnsetSecrets(config: Pick<RoutingConfig, 'buyers'>, env: NodeJS.ProcessEnv, logger: Pick<Logger, 'warn'>): void {
  for (const unset of unsetSecrets(config, env)) {
    logger.warn(unset, `buyer ${unset.buyer}: secret_env ${unset.secret_env} is not set, so its ${unset.unsigned.join(' and ')} go unsigned`);
  }
}
