import { pino, type DestinationStream, type Logger } from 'pino';

/**
 * Paths pino blanks out before a line is written. Owner tokens prove lock ownership and API keys prove
 * identity: either in a log would let anyone with log access release other people's locks.
 */
export const REDACT_PATHS = [
  'ownerToken',
  '*.ownerToken',
  'body.ownerToken',
  'req.body.ownerToken',
  'req.headers.authorization',
  'headers.authorization',
];

export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = {
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    // The request line is written by our own onResponse hook (one line per request); keep req/res lean.
    serializers: {
      err: pino.stdSerializers.err,
    },
  };
  return destination ? pino(options, destination) : pino(options);
}
