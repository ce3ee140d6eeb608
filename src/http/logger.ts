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
    serializers: { err: serializeError },
  };
  return options.destination ? pino(settings, options.destination) : pino(settings);
}

/**
 * pino's own error serializer, but each cause's text said once in `message`. pino appends every
 * cause's message to the error's, and the stores' errors already end with their cause's words
 * (`the key store cannot store new data keys: database is locked`), so a log line read
 * `…: database is locked: database is locked`. A cause whose message the line already holds adds
 * nothing; one that says something new is still appended. The stack keeps every cause's frames.
 */
function serializeError(error: unknown): unknown {
  const serialized: unknown = pino.stdSerializers.err(error as Error);
  if (serialized === error || typeof serialized !== 'object' || serialized === null) return serialized;
  return Object.assign(serialized, { message: messageWithNewCauses(error as Error) });
}

const MAX_CAUSES = 8;

function messageWithNewCauses(error: Error): string {
  let message = String(error.message ?? '');
  const seen = new Set<unknown>([error]);
  for (let cause = error.cause, depth = 0; isErrorLike(cause) && !seen.has(cause) && depth < MAX_CAUSES; cause = cause.cause, depth++) {
    seen.add(cause);
    if (cause.message !== '' && !message.includes(cause.message)) message = message === '' ? cause.message : `${message}: ${cause.message}`;
  }
  return message;
}

const isErrorLike = (value: unknown): value is { message: string; cause?: unknown } =>
  typeof value === 'object' && value !== null && typeof (value as { message?: unknown }).message === 'string';
