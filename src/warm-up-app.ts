import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import type { Config } from './config.js';
import { LockService } from './domain/lock-service.js';
import { createMetrics } from './observability/metrics.js';
import { MemoryStore } from './store/memory/memory-store.js';

/**
 * The app the warm-up runs through: built by the same code as the real one (routes, hooks, validation,
 * serialization, metrics), but over a memory store of its own and with metrics of its own, so the
 * warm-up writes nothing to the real store, takes no quota and counts in none of the served metrics.
 * Open access: it listens only on a loopback port of its own, for the warm-up's time (warm-up.ts).
 */
export async function buildWarmUpApp(config: Config, logger: FastifyBaseLogger): Promise<FastifyInstance> {
  // No sweep timer: the app lives a second or two, and its keys are released by the warm-up.
  const store = new MemoryStore({
    fenceGraceMs: config.fenceGraceMs,
    maxWaitersPerKey: config.limits.maxWaitersPerKey,
    sweepIntervalMs: 0,
  });
  const metrics = createMetrics({ defaultMetrics: false });
  const instrumented = metrics.instrumentStore(store);
  const locks = new LockService(instrumented, config.limits, metrics.lockObserver);
  return buildApp({
    locks,
    store: instrumented,
    logger: logger.child({ warmUp: true }, { level: 'silent' }),
    metrics,
    auth: { mode: 'open' },
    httpTimeouts: config.httpTimeouts,
    // Its hooks run as the real app's do, but the warm-up's own busy turns must not refuse its requests.
    loadBudget: { ...config.loadBudget, maxEventLoopDelayMs: 0 },
    accessLog: config.accessLog,
  });
}
