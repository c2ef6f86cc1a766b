import closeWithGrace from 'close-with-grace';
import { buildApp } from './app.js';
import { KeysFileError } from './auth/api-keys.js';
import { type AccessSetup, setUpAccess } from './access.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { LockService } from './domain/lock-service.js';
import { createLogger } from './observability/logger.js';
import { createMetrics } from './observability/metrics.js';
import { startTracing } from './observability/tracing.js';
import { createStore } from './store/create-store.js';
import { createHistoryStore } from './store/create-history.js';
import { HistoryRecorder, type HistoryObserver } from './domain/history.js';
import { connectionBudget } from './http/connection-budget.js';
import { warmUp } from './warm-up.js';
import { buildWarmUpApp } from './warm-up-app.js';

/**
 * Lease history events buffered at most between two writes: at 100 ms a batch (the default), far above
 * what one instance answers in that time; past it (the store is away) the oldest are dropped, not kept growing.
 */
const HISTORY_BUFFER_MAX = 50_000;

/** Reads the environment, builds the store and the app, listens, and closes gracefully on a signal. */
async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`keyholder: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }

  const logger = createLogger(config.logLevel);
  let access: AccessSetup;
  try {
    access = setUpAccess(config, logger);
  } catch (err) {
    if (err instanceof KeysFileError) {
      process.stderr.write(`keyholder: KEYHOLDER_API_KEYS_FILE: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  // Off unless the OTEL_* variables ask for it; off, nothing of OpenTelemetry is loaded.
  const tracing = await startTracing(config.tracing);
  const metrics = createMetrics(tracing ? { tracing } : {});
  const store = metrics.instrumentStore(createStore(config, logger));
  const locks = new LockService(store, config.limits, metrics.lockObserver);
  const maxConnections = connectionBudget(config.maxConnections);
  if ((config.limits.maxWaitersPerNamespace ?? config.limits.maxWaitersPerInstance) * 2 > maxConnections) {
    // Each open wait holds a connection: one team at its waiter cap would hold half the connections or more.
    logger.warn(
      { maxConnections, maxWaitersPerNamespace: config.limits.maxWaitersPerNamespace },
      "one namespace's waiters can hold half the connection budget or more; lower WAITERS_PER_NAMESPACE_MAX or raise the open-file limit",
    );
  }
  metrics.countWaitingCallers(() => locks.waitingCallers);
  const history = config.history
    ? new HistoryRecorder(createHistoryStore(config.store, config.history), {
        flushMs: config.history.flushMs,
        maxBuffered: HISTORY_BUFFER_MAX,
        observer: { lost: historyLoss(metrics.historyObserver, throttledLossLog(logger)) },
      })
    : null;
  // Not ready until the request path has been run warm (see warm-up.ts); ready at once when it is off.
  let warmedUp = config.warmUp.cycles === 0 || config.warmUp.maxMs === 0;
  let closing = false;
  const app = await buildApp({
    locks,
    store,
    logger,
    metrics,
    auth: access.auth,
    rateLimit: access.rateLimit,
    httpTimeouts: config.httpTimeouts,
    trustProxy: config.trustProxy,
    loadBudget: config.loadBudget,
    ...(tracing ? { tracing } : {}),
    maxConnections,
    accessLog: config.accessLog,
    history,
    warmedUp: () => warmedUp,
  });
  // A shutdown during the warm-up ends it (its app is closed in runWarmUp).
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onClose', async () => {
    // The buffered events first, while the store still answers.
    await history?.close();
    await store.close();
    await access.close();
    // After the store: the spans of the last requests are ended by now.
    await tracing?.shutdown();
  });

  process.on('SIGHUP', access.reloadKeys);

  // SIGTERM/SIGINT: stop taking requests, finish (or answer) the ones in flight, close the store. If
  // that takes longer than the shutdown timeout, exit anyway rather than hang a deploy.
  closeWithGrace(
    {
      delay: config.shutdownTimeoutMs,
      // SIGHUP reloads the API keys (above); it must not stop the server.
      skip: ['SIGHUP'],
      logger: { error: (msg: unknown) => logger.error({ err: msg }, 'error while shutting down') },
      onTimeout: (timeoutMs: number) => logger.warn({ timeoutMs }, 'shutdown timed out; exiting'),
    },
    async ({ signal, err }) => {
      if (err) logger.error({ err }, 'fatal error; shutting down');
      else logger.info({ signal }, 'shutting down: finishing in-flight requests');
      await app.close();
      logger.info('shut down cleanly');
    },
  );

  try {
    await app.listen({ port: config.port, host: config.host, backlog: LISTEN_BACKLOG });
  } catch (err) {
    const refusal = listenRefusal(err, config);
    if (refusal === undefined) throw err;
    process.stderr.write(`keyholder: ${refusal}\n`);
    process.exit(2);
  }
  logger.info({ store: store.kind, host: config.host, port: config.port }, 'keyholder is listening');
  if (!warmedUp) {
    // After listen: /livez answers during the warm-up, /readyz says 503 warming_up until it ends.
    await runWarmUp(config, logger, () => closing);
    warmedUp = true;
  }
}

/**
 * The start's warm-up, through a throw-away app (warm-up-app.ts). A failure is logged and the instance
 * becomes ready anyway: the warm-up only makes the first requests cheaper, it decides nothing.
 */
async function runWarmUp(config: Config, logger: ReturnType<typeof createLogger>, stopped: () => boolean): Promise<void> {
  try {
    const warmApp = await buildWarmUpApp(config, logger);
    try {
      const result = await warmUp(warmApp, config.warmUp, stopped);
      const level = result.unexpected > 0 ? 'warn' : 'info';
      logger[level]({ cycles: result.cycles, ms: Math.round(result.ms), unexpected: result.unexpected }, 'warm-up done; ready');
    } finally {
      await warmApp.close();
    }
  } catch (err) {
    logger.warn({ err }, 'warm-up failed; ready without it');
  }
}

/** A lost batch or dropped events: counted in the metrics at once, logged (throttled) too. */
function historyLoss(
  counted: Required<HistoryObserver>,
  logged: (events: number, reason: 'store' | 'buffer') => void,
): (events: number, reason: 'store' | 'buffer') => void {
  return (events, reason) => {
    counted.lost(events, reason);
    logged(events, reason);
  };
}

/**
 * 4096: connections the kernel holds for the process before it accepts them (capped by
 * net.core.somaxconn, 4096 on current kernels). Node's default, 511, is below the 1,000 new connections
 * one instance gets at once in the 3,000-caller burst bench: past the backlog the kernel drops the
 * handshakes and the callers resend their SYNs after 1, 3 and 7 s, so a caller would wait seconds for an
 * answer (even a 503 overloaded decided at once), and a renewal on a new connection could outlast its lease.
 */
const LISTEN_BACKLOG = 4096;

/**
 * A listen that failed for the configuration's sake (an address that does not resolve or is not this
 * host's, a port taken or not allowed), in one line naming the variable; undefined for anything else.
 */
function listenRefusal(err: unknown, config: Config): string | undefined {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  const where = `${config.host}:${config.port}`;
  switch (code) {
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EAI_NONAME':
      return `HOST: "${config.host}" does not resolve to an address (${code})`;
    case 'EADDRNOTAVAIL':
      return `HOST: "${config.host}" is not an address of this host (${code})`;
    case 'EADDRINUSE':
      return `PORT: ${where} is already in use (${code})`;
    case 'EACCES':
      return `PORT: not allowed to listen on ${where} (${code}; ports below 1024 need privileges)`;
    default:
      return undefined;
  }
}

/** One warning per 10 s at most, with the events lost since the last one: a store that is away loses a batch every few ms. */
function throttledLossLog(logger: ReturnType<typeof createLogger>): (events: number, reason: 'store' | 'buffer') => void {
  let lost = 0;
  let lastLogged = 0;
  return (events, reason) => {
    lost += events;
    const now = Date.now();
    if (now - lastLogged < 10_000) return;
    logger.warn({ events: lost, reason }, 'lease history: events not written (the leases themselves are unaffected)');
    lost = 0;
    lastLogged = now;
  };
}

main().catch((err: unknown) => {
  process.stderr.write(`keyholder: failed to start: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
