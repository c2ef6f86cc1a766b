import { pino, type Bindings, type ChildLoggerOptions, type DestinationStream, type LogFn, type Logger } from 'pino';

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

type Stdout = ReturnType<typeof pino.destination>;

/**
 * stdout for the logger: request lines wait in an array and reach the stdout stream (sonic-boom,
 * which writes asynchronously and handles a full pipe) as one string per batch; every other line is
 * handed on at once, after the request lines still waiting, so the order holds.
 *
 * Why not sonic-boom's own batching (minLength): it measures the bytes of the whole string it is
 * gathering on every line, which joins the pieces again each time, and encodes each batch twice. Per
 * request line that cost more than building the line (measured in a CPU profile under load); here a
 * line costs a push.
 */
class BatchingStdout {
  /** Set by the logMethod hook while a request line is being written. */
  batching = false;
  private pending: string[] = [];
  private pendingChars = 0;

  constructor(private readonly out: Stdout) {
    // A batch waits at most LOG_FLUSH_MS on a quiet instance; the timer keeps no process alive.
    setInterval(() => this.send(), LOG_FLUSH_MS).unref();
    // At exit, what is waiting goes out synchronously (sonic-boom's own exit hook may already have run).
    process.on('exit', () => this.flushSync());
  }

  write(line: string): boolean {
    if (this.batching) {
      this.pending.push(line);
      // Characters, not bytes: a request line is ASCII but for its key, and the size is only a trigger.
      this.pendingChars += line.length;
      if (this.pendingChars >= LOG_BATCH_BYTES) this.send();
      return true;
    }
    // One string with the request lines still waiting: sonic-boom starts writing it at once, as one
    // write, so the waiting lines leave with this one rather than in a write of their own before it.
    if (this.pending.length === 0) return this.out.write(line);
    this.pending.push(line);
    const batch = this.take();
    return this.out.write(batch);
  }

  flush(cb?: (err?: Error) => void): void {
    this.send();
    this.out.flush(cb);
  }

  flushSync(): void {
    this.send();
    try {
      this.out.flushSync();
    } catch {
      // Not open yet, or already closed: nothing more can be written.
    }
  }

  private send(): void {
    if (this.pending.length > 0) this.out.write(this.take());
  }

  private take(): string {
    const batch = this.pending.join('');
    this.pending = [];
    this.pendingChars = 0;
    return batch;
  }
}

export function createLogger(level: string, destination?: DestinationStream): Logger {
  // Without a destination: stdout, written asynchronously (a line per request would otherwise block
  // the event loop on every write). Request lines collect in batches until LOG_BATCH_BYTES, or for at
  // most LOG_FLUSH_MS: one write per line cost more than building the line (measured under load).
  // Every other line (start-up, warnings, errors, audit) is sent on at once, as it would be unbatched.
  // What is pending is written synchronously when the process exits (BatchingStdout, and sonic-boom).
  const stdout = destination === undefined ? new BatchingStdout(pino.destination({ dest: 1, sync: false })) : undefined;
  const options = {
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    // Request lines are written by RequestLog (request-log.ts) with their own fields; keep req/res lean.
    serializers: {
      err: serializeError,
    },
    hooks: {
      logMethod(this: Logger & { [BATCHED]?: true }, args: Parameters<LogFn>, method: LogFn): void {
        if (stdout === undefined || this[BATCHED] !== true) {
          method.apply(this, args);
          return;
        }
        // pino writes the line before it returns: the flag covers exactly this line.
        stdout.batching = true;
        try {
          method.apply(this, args);
        } finally {
          stdout.batching = false;
        }
      },
    },
  };
  return pino(options, destination ?? stdout);
}

/**
 * The logger for the one line per answered request: a child of `logger` without redaction (such a line
 * holds no secret, and redaction was the largest part of its cost) whose lines are written in batches.
 */
export function requestLineLogger<L extends { child(bindings: object, options: { redact: { paths: string[] } }): object }>(
  logger: L,
): ReturnType<L['child']> {
  const lines = logger.child({}, { redact: { paths: [] } }) as ReturnType<L['child']> & { [BATCHED]?: true };
  lines[BATCHED] = true;
  return lines;
}

type RequestLoggerParent = {
  readonly level: string;
  child(bindings: Bindings, options?: ChildLoggerOptions): LoggerMethods;
};
type LoggerMethods = RequestLoggerParent & Record<'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent', LogFn>;

/**
 * The logger of one request (Fastify's request.log), made only when the request writes a line through
 * it. Fastify makes a pino child per request, and with redaction on, making one parses the redaction
 * paths again: in a CPU profile under load that was more than any hook of the request. Most requests
 * never write a line through it (the request line has a logger of its own, requestLineLogger), so the
 * child is made on the first line instead, with the same bindings (the request id) and options (a
 * route's logLevel), and so writes exactly what Fastify's child would.
 */
class LazyRequestLogger {
  private made: LoggerMethods | undefined;

  constructor(
    private readonly parent: RequestLoggerParent,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  private logger(): LoggerMethods {
    return (this.made ??= this.parent.child(this.bindings, this.options));
  }

  get level(): string {
    return this.made?.level ?? this.options.level ?? this.parent.level;
  }

  set level(level: string) {
    (this.logger() as { level: string }).level = level;
  }

  // Methods on the prototype, not arrow fields: nothing more is made per request than this object.
  fatal(...args: Parameters<LogFn>): void {
    this.logger().fatal(...args);
  }
  error(...args: Parameters<LogFn>): void {
    this.logger().error(...args);
  }
  warn(...args: Parameters<LogFn>): void {
    this.logger().warn(...args);
  }
  info(...args: Parameters<LogFn>): void {
    this.logger().info(...args);
  }
  debug(...args: Parameters<LogFn>): void {
    this.logger().debug(...args);
  }
  trace(...args: Parameters<LogFn>): void {
    this.logger().trace(...args);
  }
  silent(...args: Parameters<LogFn>): void {
    this.logger().silent(...args);
  }

  child(bindings: Bindings, options?: ChildLoggerOptions): LoggerMethods {
    return this.logger().child(bindings, options);
  }
}

/**
 * Makes the children of Fastify's root logger (`app.log`) request loggers made on first use
 * (LazyRequestLogger). Fastify makes one per request with `app.log.child(bindings, options)`; its
 * childLoggerFactory option would do the same, but Fastify then checks the logger it returns for seven
 * methods on every request (an array and a filter each time: more than the lazy logger saves elsewhere
 * in a CPU profile). Only children of the root itself are lazy: a child of a child is pino's own.
 */
export function lazyRequestLoggers(root: RequestLoggerParent): void {
  // pino's own child, as the root has it before this: looked up on each call (the prototype's).
  const pinoChild = (of: RequestLoggerParent, bindings: Bindings, options?: ChildLoggerOptions): LoggerMethods =>
    (Object.getPrototypeOf(root) as RequestLoggerParent).child.call(of, bindings, options);
  const parent: RequestLoggerParent = {
    get level() {
      return root.level;
    },
    child: (bindings, options) => pinoChild(root, bindings, options),
  };
  // On the instance: pino's children are made from their parent (Object.create), so they inherit this
  // and pass their own `this`, which gets pino's child.
  Object.defineProperty(root, 'child', {
    configurable: true,
    writable: true,
    value: function child(this: RequestLoggerParent, bindings: Bindings, options?: ChildLoggerOptions): LoggerMethods {
      return this === root ? new LazyRequestLogger(parent, bindings, options ?? {}) : pinoChild(this, bindings, options);
    },
  });
}
