import { pino, type DestinationStream, type Logger } from 'pino';
import { checkLogLevel } from '../config.js';
import { PERSONAL_FIELDS } from '../leads/lead.js';

// The access log is built not to carry secrets or PII; redaction is the second line of defence for
// a log call somewhere else that passes a request or a lead by mistake: every personal field of a
// lead, and a whole `lead`, at the top and up to three levels down (a LeadReceived's data holds
// its lead one level down; a list of leads puts each one more), arrays included.
const NESTED = ['', '*.', '*.*.', '*.*.*.'];
const REDACT = [
  'req.headers["x-api-key"]',
  'headers["x-api-key"]',
  ...NESTED.flatMap((prefix) => [...PERSONAL_FIELDS, 'lead'].map((field) => `${prefix}${field}`)),
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
