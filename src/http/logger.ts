import { pino, type DestinationStream, type Logger } from 'pino';

// The access log is built not to carry secrets or PII; redaction is the second line of defence for
// a log call somewhere else that passes a request or a lead by mistake.
const REDACT = [
  'req.headers["x-api-key"]',
  'headers["x-api-key"]',
  'email',
  'mobile',
  'first_name',
  'last_name',
  '*.email',
  '*.mobile',
  '*.first_name',
  '*.last_name',
];

export interface LoggerOptions {
  /** Defaults to LOG_LEVEL, then `info`. */
  readonly level?: string;
  /** Defaults to stdout. Tests pass a stream to read what was logged. */
  readonly destination?: DestinationStream;
  readonly env?: NodeJS.ProcessEnv;
}

/** Throws, naming LOG_LEVEL, for a level pino does not have (its own message does not say where the value came from). */
export function checkLogLevel(level: string): string {
  if (!Object.hasOwn(pino.levels.values, level) && level !== 'silent') {
    throw new Error(`LOG_LEVEL must be one of ${Object.keys(pino.levels.values).join(', ')} or silent, not '${level}'`);
  }
  return level;
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const level = checkLogLevel(options.level ?? ((options.env ?? process.env).LOG_LEVEL || 'info'));
  const settings = {
    level,
    base: { service: 'leadpost' },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: REDACT, censor: '[redacted]' },
  };
  return options.destination ? pino(settings, options.destination) : pino(settings);
}
