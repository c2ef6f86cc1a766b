import { pino, type DestinationStream, type LogFn, type Logger } from 'pino';

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

/**
 * pino's error serializer, minus `rawPacket`: Node attaches the raw bytes of a request it could not
 * parse to the error, Authorization header and body included, as a byte array that neither redaction
 * nor a grep for a leaked key would catch.
 */
function serializeError(err: unknown): unknown {
  // Lines also log `err` as a plain message string; only errors are serialized.
  if (!(err instanceof Error)) return err;
  const out = pino.stdSerializers.err(err);
  delete out.rawPacket;
  return out;
}

/** 4 KiB, about 20 request lines: written to stdout in one call. */
const LOG_BATCH_BYTES = 4096;
/** 200 ms: the longest a request line waits in the batch on a quiet instance. */
const LOG_FLUSH_MS = 200;

/** Marks the logger of the request lines (requestLineLogger), the only lines left to wait for a batch. */
const BATCHED = Symbol('keyholder.batchedLines');

export function createLogger(level: string, destination?: DestinationStream): Logger {
  // Without a destination: stdout, written asynchronously (a line per request would otherwise block
  // the event loop on every write). Request lines collect in batches until LOG_BATCH_BYTES, or for at
  // most LOG_FLUSH_MS: one write per line cost more than building the line (measured under load).
  // Every other line (start-up, warnings, errors, audit) is sent on at once, as it would be unbatched.
  // pino flushes what is pending when the process exits.
  const stdout = destination === undefined ? pino.destination({ dest: 1, sync: false, minLength: LOG_BATCH_BYTES, periodicFlush: LOG_FLUSH_MS }) : undefined;
  const options = {
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    // The request line is written by our own onResponse hook (one line per request); keep req/res lean.
    serializers: {
      err: serializeError,
    },
    hooks: {
      logMethod(this: Logger & { [BATCHED]?: true }, args: Parameters<LogFn>, method: LogFn): void {
        method.apply(this, args);
        if (stdout !== undefined && this[BATCHED] !== true) stdout.flush();
      },
    },
  };
  return pino(options, destination ?? stdout);
}

/**
 * The logger for the one line per answered request: a child of `logger` without redaction (such a line
 * holds no secret, and redaction was the largest part of its cost) whose lines are written in batches.
 */
export function requestLineLogger<L extends { child(bindings: object, options: { redact: { paths: string[] } }): object }>(logger: L): ReturnType<L['child']> {
  const lines = logger.child({}, { redact: { paths: [] } }) as ReturnType<L['child']> & { [BATCHED]?: true };
  lines[BATCHED] = true;
  return lines;
}
