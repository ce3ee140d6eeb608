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
    parsed = parseArgs({ args: negativeValuesJoined(args, options), options, allowPositionals: how.positionals ?? false, strict: true, tokens: true });
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

/**
 * `--grace -1` as `--grace=-1`: parseArgs takes a value that begins with a dash for an option of its
 * own, and said `--grace is missing its value`, which is wrong; joined, the value reaches the
 * option's own check, which says what the option takes. Only a word that reads as a negative number.
 */
function negativeValuesJoined(args: string[], options: Options): string[] {
  const joined: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const next = args[i + 1];
    const takesValue = arg.startsWith('--') && options?.[arg.slice(2)]?.type === 'string';
    if (takesValue && next !== undefined && /^-[\d.]/.test(next)) {
      joined.push(`${arg}=${next}`);
      i++;
    } else {
      joined.push(arg);
    }
  }
  return joined;
}

/**
 * A whole number option, e.g. `--timeout MS`: one that is not, or is out of its range, is bad usage
 * naming the option and what it takes (never quoting the value, as for every option).
 */
export function wholeNumberOption(option: string, raw: string, min: number, max: number, unit: string): number {
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || value < min || value > max) throw new UsageError(`${option} must be a whole number of ${unit} from ${min} to ${max}`);
  return value;
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

/**
 * The arguments of a command that takes only `--json` (and `--help`): whether JSON was asked for,
 * or the exit code once the usage is printed (0 for help, 2 for anything else given).
 */
export function jsonOnly(args: readonly string[], command: string, usage: string, io: { out: { write(text: string): unknown }; err: { write(text: string): unknown } }): { json: boolean } | number {
  if (args.includes('--help') || args.includes('-h')) {
    io.out.write(`${usage}\n`);
    return 0;
  }
  const unknown = args.find((arg) => arg !== '--json');
  if (unknown !== undefined) {
    io.err.write(`leadpost ${command}: ${unknown.startsWith('-') ? `unknown option ${unknown.slice(0, 40)}` : 'takes no arguments'}\n\n${usage}\n`);
    return 2;
  }
  return { json: args.includes('--json') };
}
