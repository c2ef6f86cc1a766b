import { Counter, Gauge, Histogram, type LabelValues, Registry, type RegistryContentType, collectDefaultMetrics } from 'prom-client';
import type { LockObserver, Operation, OperationResult } from '../domain/lock-service.js';
import type { PermitObserver } from '../domain/permits.js';
import { ERROR_CODES, PROBLEM_CODES } from '../domain/error-codes.js';
import type { Store } from '../domain/lease-store.js';
import { InstrumentedStore, type StoreCallSink } from './instrumented-store.js';
import type { ShedBudget, ShedPriority } from '../http/load-shedding.js';
import { LeaseTracker } from './lease-tracker.js';
import type { Tracing } from './tracing.js';
import { LeanCounter, LeanHistogram } from './lean-histogram.js';
import type { HistoryObserver } from '../domain/history.js';

/**
 * Prometheus metrics for one app. Names follow Prometheus conventions: a `keyholder_` prefix, base
 * units (seconds), `_total` on counters. Labels take a few fixed values each (operation, outcome,
 * result, store kind); a lock key is never a label, since every key would become its own series.
 */
export interface Metrics {
  /** This app's own registry (not prom-client's global one), so a process can build many apps. */
  readonly registry: Registry;
  /** Pass to LockService: counts operations and lost leases. */
  readonly lockObserver: LockObserver;
  /** Pass to the semaphore and read/write lock cores: their operations, by primitive. */
  readonly permitObserver: PermitObserver;
  /** Wraps the store so its latency, health and the leases granted here are measured. */
  instrumentStore(store: Store): Store;
  /** Where the keyholder_waiting_callers gauge reads its value (LockService.waitingCallers). */
  countWaitingCallers(count: () => number): void;
  /** Counts an error answer by its problem code (every one: 401, 403, 404 and 429 included). */
  problemAnswered(code: string): void;
  /** Counts a request refused by load shedding (503 overloaded), by the budget it was over and its priority. */
  requestShed(budget: ShedBudget, priority: ShedPriority): void;
  /** Pass to the lease history's recorder: counts the batches and events it could not write. */
  readonly historyObserver: Required<HistoryObserver>;
  /** The exposition text and its content type, for GET /metrics. */
  render(): Promise<{ contentType: string; body: string }>;
}

export interface MetricsOptions {
  /** Process and Node.js runtime metrics (CPU, memory, event loop lag, GC). Default true. */
  readonly defaultMetrics?: boolean;
  /**
   * With tracing on: store calls and waits become spans, and the wait and hold histograms carry the
   * trace as an exemplar (served as OpenMetrics, the exposition format that has exemplars).
   */
  readonly tracing?: Pick<Tracing, 'storeCall' | 'waited' | 'exemplar'>;
}

/** Lock operations: well under a millisecond on a healthy store, up to the 500 ms command timeout. */
const OPERATION_BUCKETS_SECONDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
/** Hold times: from a quick critical section up to the 1 hour maximum lease. */
const HOLD_BUCKETS_SECONDS = [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600];

const HOLD_HELP = 'Time from grant to release, for leases granted and released through this instance (one per key of a lock set).';

const NON_COUNTER_TOTALS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

export function createMetrics(options: MetricsOptions = {}): Metrics {
  const { tracing } = options;
  const registry = new Registry();
  // Exemplars exist only in the OpenMetrics exposition format (Prometheus asks for it first).
  if (tracing) (registry as Registry<RegistryContentType>).setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
  if (options.defaultMetrics ?? true) {
    collectDefaultMetrics({ register: registry });
    // prom-client names these gauges `_total`, which Prometheus reserves for counters (promtool rejects
    // them); the same counts stay available per type in nodejs_active_handles/requests/resources.
    for (const name of NON_COUNTER_TOTALS) registry.removeSingleMetric(name);
  }

  // Lean (lean-histogram.ts), as the histograms below: every lock call counts one operation.
  const operations = new LeanCounter(
    'keyholder_lock_operations_total',
    'Lock operations handled, by operation (acquire, renew, release, inspect) and outcome (acquired, held, renewed, released, not_owner, inspected, invalid, too_many_waiters, quota_exceeded, aborted, error).',
    ['operation', 'outcome'],
    registry,
  );
  // Lean (lean-histogram.ts): the three histograms every lock call records into.
  const operationSeconds = new LeanHistogram(
    'keyholder_lock_operation_duration_seconds',
    'Time to answer a lock operation, store round trip included, by operation; operation="acquire" is the acquire latency.',
    ['operation'],
    OPERATION_BUCKETS_SECONDS,
    registry,
  );
  const lostLeases = new Counter({
    name: 'keyholder_lost_leases_total',
    help: 'Renews or releases that came after the lease was gone (expired, released or taken over): the caller ran its critical section unprotected.',
    labelNames: ['operation'] as const,
    registers: [registry],
  });
  // Present at 0 from the start, so rate() and increase() alerts see the first loss.
  for (const op of ['renew', 'release'] as const) lostLeases.labels(op).inc(0);

  const waitSeconds = new Histogram({
    name: 'keyholder_lock_wait_seconds',
    help: 'Time an acquire with waitMs (any primitive, lock sets included) spent waiting for a held key, by outcome (granted, not_granted).',
    labelNames: ['outcome'] as const,
    buckets: HOLD_BUCKETS_SECONDS,
    registers: [registry],
    enableExemplars: tracing !== undefined,
  });
  // Lean as well: every acquire of every primitive records into it.
  const acquireSeconds = new LeanHistogram(
    'keyholder_acquire_duration_seconds',
    "Time to answer an acquire minus any time spent waiting in the key's queue or, for a lock set, for a busy key (that is keyholder_lock_wait_seconds), by primitive (lock, semaphore, rwlock, lock_set): the acquire latency.",
    ['primitive'],
    OPERATION_BUCKETS_SECONDS,
    registry,
  );
  const acquireSecondsOf = childrenOf(acquireSeconds);
  new Gauge({
    name: 'keyholder_waiting_callers',
    help: 'Callers of this instance with an open wait right now: queued acquires (locks, semaphores, read/write locks), lock sets waiting for a busy key, blocking queries.',
    registers: [registry],
    collect() {
      this.set(waitingCallers());
    },
  });
  let waitingCallers: () => number = () => 0;

  // With tracing on, prom-client's histogram (it carries exemplars); off, the lean one of the request path.
  const holdWithExemplars = tracing
    ? new Histogram({
        name: 'keyholder_lock_hold_seconds',
        help: HOLD_HELP,
        buckets: HOLD_BUCKETS_SECONDS,
        registers: [registry],
        enableExemplars: true,
      })
    : undefined;
  const holdSeconds =
    holdWithExemplars ?? new LeanHistogram('keyholder_lock_hold_seconds', HOLD_HELP, [], HOLD_BUCKETS_SECONDS, registry).labels();
  const expiredLeases = new Counter({
    name: 'keyholder_leases_expired_total',
    help: 'Leases granted by this instance that ran out without a release through this instance (one per key of a lock set).',
    registers: [registry],
  });
  const leases = new LeaseTracker({
    expired: () => expiredLeases.inc(),
    released(heldSeconds) {
      if (tracing && holdWithExemplars) observeWithExemplar(holdWithExemplars, {}, heldSeconds, tracing);
      else holdSeconds.observe(heldSeconds);
    },
  });
  new Gauge({
    name: 'keyholder_locks_held',
    help: 'Leases granted by this instance that are neither released nor expired (one per key of a lock set).',
    registers: [registry],
    collect() {
      this.set(leases.size);
    },
  });

  const storeSeconds = new LeanHistogram(
    'keyholder_store_operation_duration_seconds',
    'Store call latency by operation (acquire, renew, release, inspect, ping) and result (ok, unavailable, error).',
    ['operation', 'result'],
    OPERATION_BUCKETS_SECONDS,
    registry,
  );
  const storeSecondsOf = childrenOf(storeSeconds);
  let instrumented: Store | undefined;
  const storeUp = new Gauge({
    name: 'keyholder_store_up',
    help: 'Whether the lock store answers (1) or not (0), checked with a ping at each scrape; store is its kind.',
    labelNames: ['store'] as const,
    registers: [registry],
    async collect() {
      // A ping per scrape keeps the gauge true on an idle instance; its result lands via storeCall.
      await instrumented?.ping().catch(() => undefined);
    },
  });

  const storeUpOf = childrenOf(storeUp);
  let lastUp: number | undefined;
  const sink: StoreCallSink = {
    storeCall(op, result, durationSeconds, waiting) {
      tracing?.storeCall(op, result, durationSeconds, waiting);
      // A waiting acquire's time is mostly its wait (keyholder_lock_wait_seconds), not store latency.
      if (waiting) return;
      storeSecondsOf(op, result).observe(durationSeconds);
      if (instrumented === undefined || result === 'error') return;
      // Set only when it changes: every store call passes here.
      const up = result === 'ok' ? 1 : 0;
      if (up === lastUp) return;
      lastUp = up;
      storeUpOf(instrumented.kind).set(up);
    },
    storeQueueShed() {
      shed.labels('store_queue', 'normal').inc();
    },
  };

  const problems = new Counter({
    name: 'keyholder_problems_total',
    help: 'Error answers (application/problem+json) by code: refused callers (unauthenticated, forbidden, rate_limited), unknown routes (not_found), bad input (invalid_request) and the lock outcomes alike.',
    labelNames: ['code'] as const,
    registers: [registry],
  });
  // Present at 0 from the start, so an alert on a rise sees the first one.
  for (const code of PROBLEM_CODES) problems.labels(code).inc(0);

  const shed = new Counter({
    name: 'keyholder_requests_shed_total',
    help: 'Requests this instance refused with 503 overloaded before any store work, by the budget it was over (event_loop_delay, requests_in_flight, open_waits, connections, store_queue) and priority (normal; last: renewals and releases).',
    labelNames: ['budget', 'priority'] as const,
    registers: [registry],
  });
  // Present at 0 from the start, so an alert on a rise sees the first one.
  for (const budget of ['event_loop_delay', 'requests_in_flight', 'open_waits', 'connections', 'store_queue'] as const) {
    for (const priority of ['normal', 'last'] as const) shed.labels(budget, priority).inc(0);
  }

  // Lease history is written off the request path and a batch the store refuses is dropped, never
  // retried: these are the only trace of what history lost (the leases themselves are unaffected).
  const historyBatchesLost = new Counter({
    name: 'keyholder_history_batches_lost_total',
    help: 'Lease history batches (one flush of the in-process buffer) the store did not take (down, slow, refused): their events are not in the history.',
    registers: [registry],
  });
  const historyEventsLost = new Counter({
    name: 'keyholder_history_events_lost_total',
    help: 'Lease history events not written (a grant with its release folded in counts as two), by reason (store: in a lost batch; buffer: dropped from a full buffer while the store was away).',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  // Present at 0 from the start, so an alert on a rise sees the first loss.
  historyBatchesLost.inc(0);
  for (const reason of ['store', 'buffer'] as const) historyEventsLost.labels(reason).inc(0);
  const historyObserver: Required<HistoryObserver> = {
    lost(events, reason) {
      if (reason === 'store') historyBatchesLost.inc();
      historyEventsLost.labels(reason).inc(events);
    },
  };

  const primitiveOperations = new Counter({
    name: 'keyholder_primitive_operations_total',
    help: 'Semaphore, read/write lock and lock set operations handled, by primitive (semaphore, rwlock, lock_set), operation (acquire, renew, release, inspect) and outcome (as keyholder_lock_operations_total, plus limit_mismatch).',
    labelNames: ['primitive', 'operation', 'outcome'] as const,
    registers: [registry],
  });
  const primitiveSeconds = new Histogram({
    name: 'keyholder_primitive_operation_duration_seconds',
    help: 'Time to answer a semaphore, read/write lock or lock set operation, store round trip (and any wait) included, by primitive and operation.',
    labelNames: ['primitive', 'operation'] as const,
    buckets: OPERATION_BUCKETS_SECONDS,
    registers: [registry],
  });

  // Lost leases and waits are counted alike for every primitive (the metrics predate the others). A wait
  // ends with every hand-off on a hot key: its child is looked up once, not hashed from its label each time.
  const waitSecondsOf = childrenOf(waitSeconds);
  const leaseEvents: Pick<LockObserver & PermitObserver, 'lostLease' | 'waited'> = {
    lostLease(op) {
      lostLeases.labels(op).inc();
    },
    waited(seconds, granted) {
      const outcome = granted ? 'granted' : 'not_granted';
      if (tracing) {
        tracing.waited(seconds, granted);
        observeWithExemplar(waitSeconds, { outcome }, seconds, tracing);
      } else {
        waitSecondsOf(outcome).observe(seconds);
      }
    },
  };

  const operationsOf = childrenOf(operations);
  const operationSecondsOf = childrenOf(operationSeconds);
  const lockObserver: LockObserver = {
    ...leaseEvents,
    operation(op, result, durationSeconds, waitedSeconds) {
      operationsOf(op, outcomeLabel(op, result)).inc();
      operationSecondsOf(op).observe(durationSeconds);
      if (op === 'acquire') acquireSecondsOf('lock').observe(Math.max(0, durationSeconds - waitedSeconds));
    },
    // A lock set is counted as the other primitives are, under primitive="lock_set" (one count per call,
    // whatever its number of keys): its calls are few beside a lock's, so prom-client's labels() will do.
    setOperation(op, result, durationSeconds, waitedSeconds) {
      primitiveOperations.labels(LOCK_SET, op, outcomeLabel(op, result)).inc();
      primitiveSeconds.labels(LOCK_SET, op).observe(durationSeconds);
      if (op === 'acquire') acquireSecondsOf(LOCK_SET).observe(Math.max(0, durationSeconds - waitedSeconds));
    },
  };

  const permitObserver: PermitObserver = {
    ...leaseEvents,
    operation(kind, op, result, durationSeconds, waitedSeconds) {
      primitiveOperations.labels(kind, op, outcomeLabel(op, result)).inc();
      primitiveSeconds.labels(kind, op).observe(durationSeconds);
      if (op === 'acquire') acquireSecondsOf(kind).observe(Math.max(0, durationSeconds - waitedSeconds));
    },
  };

  return {
    registry,
    lockObserver,
    permitObserver,
    countWaitingCallers(count: () => number) {
      waitingCallers = count;
    },
    instrumentStore(store) {
      instrumented = new InstrumentedStore(store, sink, leases);
      return instrumented;
    },
    problemAnswered(code: string) {
      problems.labels(code).inc();
    },
    requestShed(budget, priority) {
      shed.labels(budget, priority).inc();
    },
    historyObserver,
    async render() {
      return { contentType: registry.contentType, body: await registry.metrics() };
    },
  };
}

/** The primitive label of a lock set's calls (keyholder_primitive_operations_total and its histograms). */
const LOCK_SET = 'lock_set';

const SUCCESS: Readonly<Record<Operation, string>> = { acquire: 'acquired', renew: 'renewed', release: 'released', inspect: 'inspected' };

/** The outcome label of an operation: its success word, or its error code's outcome in the table of codes. */
function outcomeLabel(op: Operation, result: OperationResult): string {
  if (result === 'ok') return SUCCESS[op];
  return result === 'error' ? 'error' : ERROR_CODES[result].outcome;
}

/** An observation that links to the request's trace (when there is one) as the bucket's exemplar. */
function observeWithExemplar<L extends string>(
  histogram: Histogram<L>,
  labels: LabelValues<L>,
  value: number,
  tracing: Pick<Tracing, 'exemplar'>,
): void {
  // prom-client types exemplar labels like the metric's own; an exemplar's are the trace's ids.
  const exemplarLabels = tracing.exemplar() as LabelValues<L> | undefined;
  histogram.observe(exemplarLabels === undefined ? { labels, value } : { labels, value, exemplarLabels });
}

/**
 * A metric's labelled child for each combination of one or two label values, made on first use and
 * kept: the lock calls record several metrics each, and prom-client's `labels()` hashes the values anew
 * on every call. Two map look-ups and no allocation per call (no rest array, no joined key). The label
 * values are a few fixed words (see the interface above), so the maps stay small. (Nothing here resets
 * these metrics; a reset would detach the kept children.)
 */
function childrenOf<C>(metric: { labels(...values: string[]): C }): (first: string, second?: string) => C {
  const children = new Map<string, Map<string | undefined, C>>();
  return (first, second) => {
    let bySecond = children.get(first);
    if (bySecond === undefined) children.set(first, (bySecond = new Map<string | undefined, C>()));
    let child = bySecond.get(second);
    if (child === undefined) {
      child = second === undefined ? metric.labels(first) : metric.labels(first, second);
      bySecond.set(second, child);
    }
    return child;
  };
}
