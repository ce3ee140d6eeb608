import { pino, type DestinationStream, type Logger } from 'pino';
import { checkLogLevel } from '../config.js';

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
