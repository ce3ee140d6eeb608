// The commands' arguments, read one way: node:util's parseArgs, with its errors said in a line
// that names the option at fault and never quotes a value (which may be an e-mail or a mobile).

import { parseArgs } from 'node:util';

/** A problem with a command's arguments: the command prints it with its usage and exits 2. */
export class UsageError extends Error {}

type Options = NonNullable<Parameters<typeof parseArgs>[0]>['options'];

/**
 * The options and positionals of `args`. An unknown option, a missing value, or an option given
 * twice (which parseArgs would settle silently by taking the last) is a UsageError.
 */
export function readArgs(args: string[], options: Options, how: { positionals?: boolean; withoutOption?: string } = {}) {
  let parsed;
  try {
    parsed = parseArgs({ args, options, allowPositionals: how.positionals ?? false, strict: true, tokens: true });
  } catch (error) {
    throw new UsageError(usageProblem(error, how.withoutOption));
  }
  const seen = new Set<string>();
  for (const token of (parsed.tokens ?? []) as ReadonlyArray<{ kind: string; name?: string }>) {
    if (token.kind !== 'option' || token.name === undefined) continue;
    if (seen.has(token.name)) throw new UsageError(`--${token.name} is given twice`);
    seen.add(token.name);
  }
  return { values: parsed.values as Record<string, string | boolean | undefined>, positionals: parsed.positionals };
}

function usageProblem(error: unknown, withoutOption = 'an argument without its option'): string {
  const { code, message } = error as { code?: unknown; message?: unknown };
  const option = typeof message === 'string' ? /'(--?[a-z][a-z-]{0,30})(?: <value>)?'/i.exec(message)?.[1] : undefined;
  switch (code) {
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
      return withoutOption;
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return option ? `unknown option ${option}` : 'an unknown option';
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      return option ? `${option} is missing its value, or takes none` : 'an option is missing its value, or takes none';
    default:
      return 'the arguments could not be read';
  }
}
