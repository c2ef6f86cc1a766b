import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.js';
import { DEFAULT_ACCESS_LOG, DEFAULT_LIMITS, type HttpTimeouts, type TrustProxy } from '../../src/config.js';
import type { LeaseLimits } from '../../src/domain/limits.js';
import type { AuthMode } from '../../src/http/auth.js';
import type { RateLimitSettings } from '../../src/http/rate-limit.js';
import type { LoadBudget } from '../../src/http/load-shedding.js';
import type { AccessLogSettings } from '../../src/observability/request-log.js';
import { LockService, type LockObserver } from '../../src/domain/lock-service.js';
import { createLogger } from '../../src/observability/logger.js';
import type { Metrics } from '../../src/observability/metrics.js';
import { createPermitCores, type PermitCores } from '../../src/domain/primitives.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import type { Store } from '../../src/domain/lease-store.js';
import { HistoryRecorder } from '../../src/domain/history.js';
import { MemoryHistory } from '../../src/store/memory/memory-history.js';

/** A request line for every request: for the tests that read every line (what a line holds, that none leaks). */
export const FULL_ACCESS_LOG: AccessLogSettings = { ...DEFAULT_ACCESS_LOG, mode: 'full' };

export interface TestApp {
  readonly app: FastifyInstance;
  readonly store: Store;
  readonly locks: LockService;
  /** The semaphores' and read/write locks' engines the app serves (made here, as the app would make them). */
  readonly permits: PermitCores;
  /** Every log line the app wrote, as text. */
  readonly logs: string[];
  /** Lease history, on in test apps (production has it off by default) unless the test passed null. */
  readonly history: HistoryRecorder | null;
  close(): Promise<void>;
}

/** Builds the app in-process (no listening socket unless a test asks) over the given store. */
export async function buildTestApp(
  options: {
    store?: Store;
    limits?: LeaseLimits;
    observer?: LockObserver;
    logLevel?: string;
    auth?: AuthMode;
    rateLimit?: RateLimitSettings;
    httpTimeouts?: HttpTimeouts;
    metrics?: Metrics;
    trustProxy?: TrustProxy;
    loadBudget?: LoadBudget;
    maxConnections?: number;
    accessLog?: AccessLogSettings;
    history?: HistoryRecorder | null;
    /** Hooks of the test's own, added before the app is ready. */
    configure?: (app: FastifyInstance) => void;
  } = {},
): Promise<TestApp> {
  const store = options.store ?? new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 });
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logs.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  });
  const logger = createLogger(options.logLevel ?? 'info', sink);
  const locks = new LockService(store, options.limits ?? DEFAULT_LIMITS, options.observer);
  const permits = createPermitCores(store, locks.limits, locks.waitGate, options.metrics?.permitObserver);
  const history =
    options.history === undefined
      ? new HistoryRecorder(new MemoryHistory({ eventsPerKey: 50, keysPerNamespace: 5_000, retentionMs: 86_400_000 }), {
          flushMs: 5,
          maxBuffered: 50_000,
        })
      : options.history;
  const app = await buildApp({
    locks,
    permits,
    store,
    logger,
    auth: options.auth,
    rateLimit: options.rateLimit,
    httpTimeouts: options.httpTimeouts,
    metrics: options.metrics,
    trustProxy: options.trustProxy,
    loadBudget: options.loadBudget,
    maxConnections: options.maxConnections,
    accessLog: options.accessLog,
    history,
  });
  options.configure?.(app);
  await app.ready();
  return {
    app,
    store,
    locks,
    permits,
    logs,
    history,
    close: async () => {
      await app.close();
      await history?.close();
      await store.close();
    },
  };
}
