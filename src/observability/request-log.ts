import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from 'fastify';
import { problemCodeOf } from '../http/problem.js';
import { requestLineLogger } from './logger.js';
import { RequestCounts } from './request-counts.js';
import { matchedRoute } from '../http/matched-route.js';

/** Which request lines are written (ACCESS_LOG and the variables beside it in config.ts). */
export interface AccessLogSettings {
  /** `sampled`: counts per route and status, one line in `sampleEvery`; `full`: a line per request. */
  readonly mode: 'sampled' | 'full';
  /** One request line in this many is written in full when sampled (0: none). */
  readonly sampleEvery: number;
  /** How often the counts are written when sampled. */
  readonly summaryMs: number;
  /** Answered this much later than the wait it asked for: written as a warning, in either mode. */
  readonly slowMs: number;
}

/**
 * Told of every answer as its request completes (metrics count the error answers by code). Called from
 * the completion callback Fastify makes for every request anyway: an onResponse hook for it would add
 * a hook run (and its closure) to every request.
 */
export type AnswerObserver = (reply: FastifyReply) => void;

/** The levels at which a logger writes info lines. */
const INFO_WRITTEN = new Set(['info', 'debug', 'trace']);

/**
 * The request log. Fastify's "incoming" + "completed" pair is replaced by one structured line (method,
 * route, status, duration, lock key, API key id) per request that is written; bodies and headers are
 * never logged, so owner tokens and credentials cannot leak through it.
 *
 * Which requests get a line: every one answered 5xx (at error; 503 overloaded: one in `sampleEvery`, at
 * warn, when sampled) or slow (at warn), in either mode; of
 * the others, every one with ACCESS_LOG=full, else one in `sampleEvery` (at info, marked
 * `sampledOneIn`) and a count per route and status every `summaryMs` ("requests"). Warnings, errors
 * and audit lines from anywhere else are written by their own code and never pass through here.
 */
export class RequestLog extends LogController {
  /**
   * Where the info lines go (requestLineLogger: no redaction, written in batches). Such a line holds
   * only the fields below, none of them a secret. Lines at warn or error go through the request's own
   * logger, which redacts and writes at once. Absent: every line goes through the request's logger.
   */
  private readonly lines: FastifyBaseLogger | undefined;
  /** Where the counts go: one line per interval, written at once. */
  private readonly base: FastifyBaseLogger | undefined;
  private readonly settings: AccessLogSettings;
  private readonly counts: RequestCounts | undefined;
  private readonly timer: NodeJS.Timeout | undefined;
  /** Requests seen that could have been sampled, to pick one in `sampleEvery`. */
  private seen = 0;
  /** 503 overloaded answers seen, to pick one in `sampleEvery`. */
  private shedSeen = 0;

  private readonly answered: AnswerObserver | undefined;

  constructor(logger: FastifyBaseLogger | undefined, settings: AccessLogSettings, answered?: AnswerObserver) {
    super();
    this.answered = answered;
    this.lines = logger === undefined ? undefined : requestLineLogger(logger);
    this.base = logger;
    this.settings = settings;
    if (settings.mode === 'sampled' && logger !== undefined) {
      this.counts = new RequestCounts();
      // Never keeps the process alive; close() writes what is left.
      this.timer = setInterval(() => this.writeCounts(), settings.summaryMs).unref();
    }
  }

  override incomingRequest(): void {
    // Nothing: the single line is written when the request completes.
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    this.answered?.(reply);
    const status = reply.statusCode;
    const elapsedMs = reply.elapsedTime;
    // 503 overloaded: this instance refused (a burst: thousands at once) or could not deliver in time. A line
    // each, written at once, cost about 0.4 ms of a refusal's 1 to 1.5 ms in a burst's CPU profile: the
    // shedding's own log would feed the overload. Counted, and written one in sampleEvery (at warn, so
    // LOG_LEVEL=warn still shows who is refused); every one with ACCESS_LOG=full.
    if (status === 503 && !error && this.counts !== undefined && problemCodeOf(reply) === 'overloaded') {
      this.counts.add(request.method, routeOf(request), status, elapsedMs);
      const every = this.settings.sampleEvery;
      if (every > 0 && ++this.shedSeen >= every) {
        this.shedSeen = 0;
        reply.log.warn(this.line(request, status, elapsedMs, every), 'request refused: overloaded');
      }
      return;
    }
    if (error || status >= 500) {
      reply.log.error(
        { ...this.line(request, status, elapsedMs, undefined), ...(error ? { err: error } : {}) },
        error ? 'request errored' : 'request',
      );
      this.counts?.add(request.method, routeOf(request), status, elapsedMs);
      return;
    }
    if (elapsedMs > this.settings.slowMs + askedWaitMs(request)) {
      reply.log.warn({ ...this.line(request, status, elapsedMs, undefined), slow: true, slowMs: this.settings.slowMs }, 'slow request');
      this.counts?.add(request.method, routeOf(request), status, elapsedMs);
      return;
    }
    // Only where the request's logger writes info lines too (a route may set a quieter logLevel).
    if (!INFO_WRITTEN.has(reply.log.level)) return;
    const counts = this.counts;
    if (counts === undefined) {
      this.writeInfo(request, reply, status, elapsedMs, undefined);
      return;
    }
    counts.add(request.method, routeOf(request), status, elapsedMs);
    const every = this.settings.sampleEvery;
    if (every > 0 && ++this.seen >= every) {
      this.seen = 0;
      this.writeInfo(request, reply, status, elapsedMs, every);
    }
  }

  /** Writes the counts still waiting and stops the timer (the app's onClose). */
  close(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.writeCounts();
  }

  private writeInfo(
    request: FastifyRequest,
    reply: FastifyReply,
    status: number,
    elapsedMs: number,
    sampledOneIn: number | undefined,
  ): void {
    const lines = this.lines;
    if (lines !== undefined && INFO_WRITTEN.has(lines.level)) {
      // The request's own logger binds the id itself (Fastify's requestIdLogLabel); this one does not.
      lines.info({ reqId: request.id, ...this.line(request, status, elapsedMs, sampledOneIn) }, 'request');
    } else {
      reply.log.info(this.line(request, status, elapsedMs, sampledOneIn), 'request');
    }
  }

  private line(request: FastifyRequest, status: number, elapsedMs: number, sampledOneIn: number | undefined) {
    const params = request.params as { key?: unknown } | undefined;
    return {
      method: request.method,
      route: routeOf(request),
      status,
      durationMs: Math.round(elapsedMs * 100) / 100,
      // pino leaves out an undefined field.
      key: typeof params?.key === 'string' ? params.key : undefined,
      // Set by the auth hook on routes that need a caller; absent on public routes.
      keyId: request.principal?.keyId,
      sampledOneIn,
    };
  }

  private writeCounts(): void {
    const summary = this.counts?.take();
    if (summary !== undefined) this.base?.info(summary, 'requests');
  }
}

/** The route's path pattern; null when no route matched (a 404). */
function routeOf(request: FastifyRequest): string | null {
  return matchedRoute(request).url ?? null;
}

/**
 * The waitMs a request asked for (a lock or permit acquire's body, a blocking query's query string):
 * answering within it is not slow, however long it took.
 */
function askedWaitMs(request: FastifyRequest): number {
  const body = request.body as { waitMs?: unknown } | null | undefined;
  const query = request.query as { waitMs?: unknown } | null | undefined;
  const asked = Number((typeof body === 'object' && body !== null ? body.waitMs : undefined) ?? query?.waitMs ?? 0);
  return Number.isFinite(asked) && asked > 0 ? asked : 0;
}
