import { createServer } from 'node:http';
import type { Socket } from 'node:net';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply } from 'fastify';
import fastifySwagger from '@fastify/swagger';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { DEFAULT_ACCESS_LOG, DEFAULT_HTTP_TIMEOUTS, type HttpTimeouts, type TrustProxy } from './config.js';
import { ShuttingDownError } from './domain/errors.js';
import type { LockService } from './domain/lock-service.js';
import type { Store } from './domain/lease-store.js';
import { createPermitCores, type PermitCores } from './domain/primitives.js';
import { registerErrorHandling } from './http/error-handler.js';
import { serializerCompiler } from './http/serializer.js';
import { validatorCompiler } from './http/validator.js';
import { refuseOversizedExpectations } from './http/body-limit.js';
import { BODY_LIMIT_BYTES } from './http/largest-body.js';
import { countingClientErrorHandler, frameworkErrors, refuseUnknownExpectations } from './http/transport-errors.js';
import { openApiTransform, openApiTransformObject } from './http/openapi.js';
import { type AuthMode, registerAuth } from './http/auth.js';
import { type RateLimitSettings, registerRateLimit } from './http/rate-limit.js';
import { type LoadBudget, registerLoadShedding } from './http/load-shedding.js';
import { registerConnectionBudget } from './http/connection-budget.js';
import { adminRoutes } from './http/routes/admin.js';
import { problemCodeOf } from './http/problem.js';
import { lockRoutes } from './http/routes/locks.js';
import { lockSetRoutes } from './http/routes/lock-sets.js';
import { LockSetService } from './domain/lock-sets.js';
import { permitAdminRoutes } from './http/routes/permits.js';
import { permitPrimitives } from './http/routes/primitives.js';
import { healthRoutes } from './http/routes/health.js';
import { docsRoutes } from './http/routes/docs.js';
import { consoleRoutes } from './http/routes/console.js';
import { metricsRoutes } from './http/routes/metrics.js';
import { historyRoutes } from './http/routes/history.js';
import { adminQueueRoutes } from './http/routes/admin-queue.js';
import { LeaseHistory, registerLeaseHistory } from './http/lease-history.js';
import { useJsonBodyParser } from './http/json-body.js';
import type { HistoryRecorder } from './domain/history.js';
import type { Metrics } from './observability/metrics.js';
import type { Tracing } from './observability/tracing.js';
import { type AccessLogSettings, RequestLog } from './observability/request-log.js';
import { lazyRequestLoggers } from './observability/logger.js';

export interface AppDeps {
  readonly locks: LockService;
  readonly store: Store;
  /** Semaphores and read/write locks; built over `store` with the lock service's bounds when absent. */
  readonly permits?: PermitCores;
  readonly logger: FastifyBaseLogger;
  /** Served at GET /metrics when given (server.ts always gives it; see createMetrics). */
  readonly metrics?: Metrics;
  /** Who may call what; open (no keys) when absent. */
  readonly auth?: AuthMode;
  /** Per-key request rate; none when absent. */
  readonly rateLimit?: RateLimitSettings;
  /** Fastify's trustProxy (TRUST_PROXY); false (the socket's peer is the client) when absent. */
  readonly trustProxy?: TrustProxy;
  /** Connection and request timeouts; DEFAULT_HTTP_TIMEOUTS when absent. */
  readonly httpTimeouts?: HttpTimeouts;
  /** Past it, new requests get 503 overloaded before any store work (see load-shedding.ts); none when absent. */
  readonly loadBudget?: LoadBudget;
  /** A server span per API call (see tracing.ts); no hooks at all when absent. */
  readonly tracing?: Pick<Tracing, 'traceRequests'>;
  /** Connections kept open at once; past it, see connection-budget.ts. No cap when absent. */
  readonly maxConnections?: number;
  /** Which request lines are written (ACCESS_LOG); DEFAULT_ACCESS_LOG (sampled) when absent. */
  readonly accessLog?: AccessLogSettings;
  /** Lease history (HISTORY): the routes record into it; none recorded (and empty histories) when absent. */
  readonly history?: HistoryRecorder | null;
  /** False while the start's warm-up runs: /readyz answers 503 warming_up until it is true. Ready at once when absent. */
  readonly warmedUp?: () => boolean;
}

/**
 * How often Node checks connections against the headers and request timeouts. Node's default (30 s)
 * would let a slow client hold a connection for up to 30 s past the timeout.
 */
const TIMEOUT_CHECK_INTERVAL_MS = 1000;

/**
 * Marks a socket whose first request has arrived. Its idle timeout is set once, on that request, in
 * the server's own request handler: a second 'request' listener made Node copy the listener list and
 * set the timer again on every request.
 */
const FIRST_REQUEST_SEEN = Symbol('keyholder.firstRequestSeen');

/** 50 ms: how often a closing server closes the keep-alive connections that have become idle since. */
const IDLE_SWEEP_MS = 50;

export const API_INFO = {
  title: 'keyholder',
  version: '0.1.0',
  description:
    'A lock service over REST. Take, renew and release named locks; every grant carries a secret owner token ' +
    '(proves who holds it) and a fencing token (a per-key number that only goes up) for the protected resource ' +
    'to reject stale holders. Errors are application/problem+json (RFC 9457) with a stable `code`.',
  license: { name: 'MIT', identifier: 'MIT' },
};

/** Builds the app: plugins and routes. Never reads the environment and never listens. */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const timeouts = deps.httpTimeouts ?? DEFAULT_HTTP_TIMEOUTS;
  const metrics = deps.metrics;
  // Every error answer by code, wherever it came from (auth, routing, limits, the lock rules): counted
  // as the request completes, by the request log's completion (no onResponse hook on every request).
  const countProblems = metrics
    ? (reply: FastifyReply) => {
        if (reply.statusCode >= 400) metrics.problemAnswered(problemCodeOf(reply) ?? 'other');
      }
    : undefined;
  const requestLog = new RequestLog(deps.logger, deps.accessLog ?? DEFAULT_ACCESS_LOG, countProblems);
  const app = Fastify({
    loggerInstance: deps.logger,
    trustProxy: deps.trustProxy ?? false,
    requestTimeout: timeouts.requestTimeoutMs,
    keepAliveTimeout: timeouts.keepAliveTimeoutMs,
    connectionTimeout: timeouts.connectionTimeoutMs,
    // The server Fastify would make, plus the switch to the idle timeout on a connection's first request.
    serverFactory: (handler) => {
      const server = createServer(
        {
          headersTimeout: timeouts.headersTimeoutMs,
          connectionsCheckingInterval: Math.min(TIMEOUT_CHECK_INTERVAL_MS, timeouts.headersTimeoutMs),
        },
        (request, response) => {
          const socket = request.socket as Socket & { [FIRST_REQUEST_SEEN]?: true };
          if (socket[FIRST_REQUEST_SEEN] !== true) {
            socket[FIRST_REQUEST_SEEN] = true;
            socket.setTimeout(timeouts.connectionTimeoutMs);
          }
          handler(request, response);
        },
      );
      server.keepAliveTimeout = timeouts.keepAliveTimeoutMs;
      server.requestTimeout = timeouts.requestTimeoutMs;
      server.setTimeout(timeouts.connectionTimeoutMs);
      return server;
    },
    logController: requestLog,
    // Its problems are answered on the socket, before any request exists: counted here, not at completion.
    clientErrorHandler: countingClientErrorHandler(metrics ? (code) => metrics.problemAnswered(code) : undefined),
    frameworkErrors,
    bodyLimit: BODY_LIMIT_BYTES,
    // Keys may be 256 characters (more when percent-encoded); a longer one must reach validation and
    // get a 400 naming the key, not a 414 from the router. Node's header size limit bounds URLs anyway.
    routerOptions: { maxParamLength: 16_384 },
    // During shutdown we answer problem+json ourselves (see the preClose hook) instead of Fastify's JSON.
    return503OnClosing: false,
  }).withTypeProvider<ZodTypeProvider>();
  // request.log is made on its first line, not for every request (see lazyRequestLoggers).
  lazyRequestLoggers(app.log);

  // The API speaks JSON only: without this, Fastify's built-in text/plain parser would accept a
  // plain-text body and answer 400 where 415 says what is wrong.
  app.removeContentTypeParser('text/plain');
  // JSON as Fastify parses it, with the reason kept when a body is refused (json-body.ts).
  useJsonBodyParser(app);
  // A client that connects and sends nothing must not hold its socket for the whole idle timeout.
  // Until the first request arrives, the socket's own timeout is the headers timeout (it closes the
  // socket without a word); from then on the usual idle timeout applies (set on the first request by
  // the server made above; Node itself sets it again on every later one). Node 20's periodic check of
  // connections (connectionsCheckingInterval) also closes such a socket, answering 408 first; which of
  // the two runs first depends on how late the event loop is. Neither is left to the other: the check
  // is Node's behaviour of the day, and it only runs once a check interval has passed.
  app.server.on('connection', (socket: Socket) => socket.setTimeout(timeouts.headersTimeoutMs));
  refuseOversizedExpectations(app.server, BODY_LIMIT_BYTES);
  refuseUnknownExpectations(app.server, metrics ? (code) => metrics.problemAnswered(code) : undefined);

  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  registerErrorHandling(app);

  deps.tracing?.traceRequests(app);
  // The counts of the last interval are written before the process goes.
  app.addHook('onClose', (_instance, done) => {
    requestLog.close();
    done();
  });

  let closing = false;
  let idleSweep: NodeJS.Timeout | undefined;
  app.addHook('preClose', async () => {
    closing = true;
    // Waiting callers are in-flight requests: answer them now (503 shutting_down) so close does not hang.
    deps.locks.shutdown();
    // Fastify closes the connections idle when the close begins, once; a keep-alive connection whose
    // request was still in flight then is idle once that request is answered, and would hold the close
    // (and the exit) for its whole keep-alive timeout, past SHUTDOWN_TIMEOUT_MS when that is longer.
    // Close such connections as they become idle (never one with a request under way).
    idleSweep = setInterval(() => app.server.closeIdleConnections(), IDLE_SWEEP_MS);
    idleSweep.unref();
  });
  app.addHook('onClose', (_instance, done) => {
    clearInterval(idleSweep);
    done();
  });
  // New requests during shutdown get the same answer as the waiters (the error handler writes it).
  // Callback style: it runs on every request, and an async hook costs a promise each time.
  app.addHook('onRequest', (_request, _reply, done) => {
    done(closing ? new ShuttingDownError() : undefined);
  });
  // Before auth and the routes: a refused request costs as little as possible, and no store call.
  if (deps.maxConnections !== undefined) {
    registerConnectionBudget(app, deps.maxConnections, metrics ? () => metrics.requestShed('connections', 'normal') : undefined);
  }
  if (deps.loadBudget) {
    await registerLoadShedding(app, {
      budget: deps.loadBudget,
      openWaits: () => deps.locks.waitingCallers,
      ...(metrics ? { onShed: (budget, priority) => metrics.requestShed(budget, priority) } : {}),
    });
  }
  registerAuth(app, deps.auth ?? { mode: 'open' });

  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: API_INFO,
      // Relative: the document describes whichever keyholder serves it (the /docs page calls that one).
      servers: [{ url: '/', description: 'The keyholder serving this document' }],
      tags: [
        { name: 'locks', description: 'Take, renew, release and inspect named locks' },
        { name: 'lock sets', description: 'Several locks of one namespace taken, renewed and released together, all or none' },
        ...permitPrimitives().map(({ names }) => ({ name: names.tag, description: names.tagDescription })),
        { name: 'health', description: 'Liveness and readiness probes' },
        { name: 'admin', description: 'Operator routes (API key scope `admin`): list held locks, force-release' },
        { name: 'docs', description: "This API's OpenAPI document" },
      ],
      components: {
        securitySchemes: {
          bearerAuth: {
            type: 'http',
            scheme: 'bearer',
            description:
              "An API key from the operator (npm run keys:new). Scope `locks` covers the lock, semaphore and read/write lock routes in the key's " +
              'namespace; scope `admin` the admin routes in every namespace. Without a key: 401 unauthenticated; ' +
              'without the scope: 403 forbidden.',
          },
        },
      },
      security: [{ bearerAuth: [] }],
    },
    transform: openApiTransform,
    transformObject: openApiTransformObject,
  });

  registerLeaseHistory(app, deps.history ? new LeaseHistory(deps.history, deps.store.clock) : null);
  // After the auth hook and before the routes (see rate-limit.ts).
  await registerRateLimit(app, deps.rateLimit ?? { max: 0, windowMs: 1000 });
  await app.register(lockRoutes, { locks: deps.locks });
  await app.register(lockSetRoutes, { lockSets: new LockSetService(deps.store, deps.locks.limits, deps.locks) });
  const permits = deps.permits ?? createPermitCores(deps.store, deps.locks.limits, deps.locks.waitGate, deps.metrics?.permitObserver);
  for (const primitive of permitPrimitives()) await app.register(primitive.routes, { core: permits[primitive.names.path] });
  await app.register(adminRoutes, { locks: deps.locks });
  for (const { names } of permitPrimitives()) await app.register(permitAdminRoutes(permits[names.path], names));
  await app.register(adminQueueRoutes, { locks: deps.locks, permits });
  await app.register(historyRoutes);
  await app.register(healthRoutes, { store: deps.store, ...(deps.warmedUp ? { warmedUp: deps.warmedUp } : {}) });
  await app.register(docsRoutes);
  await app.register(consoleRoutes);
  if (deps.metrics) await app.register(metricsRoutes, { metrics: deps.metrics });
  return app;
}
