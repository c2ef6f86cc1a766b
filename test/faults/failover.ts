import { KeyholderProcess } from '../helpers/keyholder-process.js';
import { checkHistory, DEFAULT_CHECK_OPTIONS } from './checker.js';
import { Driver } from './driver.js';
import type { LockOp } from './history.js';
import { TTL_MS, type ScenarioResult } from './scenarios.js';

/**
 * One failover under traffic, for any replicated store: 32 clients drive the keyholder instances, the
 * scenario's `inject` kills (or fails over) the store's leader some way into the run, and the history
 * checker judges the whole run. Used by the Sentinel, Cluster and etcd fault runs.
 */
export interface FailoverInjection {
  /** When the fault took effect (run clock, ms). */
  readonly faultAtMs: number;
  /** Until when no instance can possibly get an answer from the store (a window the checker treats as blind). */
  readonly blindUntilMs: number;
  /** What was done, for the report. */
  readonly description: string;
}

export interface FailoverOptions {
  readonly name: string;
  readonly urls: readonly string[];
  readonly keyPrefix: string;
  /** The six lock names the clients share; absent: `<keyPrefix>-k0` to `-k5`. */
  readonly keys?: readonly string[];
  readonly durationMs: number;
  /** Runs alongside the traffic; resolves once the fault was injected and the store has a new leader. */
  readonly inject: (driver: Driver) => Promise<FailoverInjection>;
  readonly clients?: number;
  /** Lease length; a client holds a lease for up to a fifth of it (see Driver). */
  readonly ttlMs?: number;
}

export interface FailoverResult extends ScenarioResult {
  /** Overlaps in which at least one grant was answered before the fault took effect. */
  readonly overlapsWithGrantsBeforeFault: number;
  readonly injection: FailoverInjection;
}

/** The counts of a run that broke no safety rule: what a failover with replica acknowledgement must keep. */
export const SAFE = { overlaps: 0, grantsDuringLease: 0, tokenRegressions: 0, duplicateTokens: 0, staleWritesAccepted: 0 } as const;

export async function failoverUnderTraffic(options: FailoverOptions): Promise<FailoverResult> {
  const driver = new Driver({
    urls: options.urls,
    clients: options.clients ?? 32,
    keys: options.keys ?? ['k0', 'k1', 'k2', 'k3', 'k4', 'k5'].map((k) => `${options.keyPrefix}-${k}`),
    ttlMs: options.ttlMs ?? TTL_MS,
    durationMs: options.durationMs,
  });
  const [, injection] = await Promise.all([driver.run(), options.inject(driver)]);
  driver.fault('store leader lost', null, injection.faultAtMs, injection.blindUntilMs, 'none');
  const report = checkHistory(
    { ops: driver.ops, faults: driver.faults },
    {
      ...DEFAULT_CHECK_OPTIONS,
      observerLagMs: driver.maxLagMs,
      observerStalls: driver.stalls,
    },
  );

  const ops = driver.ops.filter((op): op is LockOp => op.type === 'lock');
  const grants = ops.filter((o) => o.kind === 'acquire' && o.outcome === 'ok');
  const answeredBefore = new Set(grants.filter((g) => g.endMs < injection.faultAtMs).map((g) => g.id));
  const unavailable = ops.filter((o) => o.outcome === 'unavailable' || o.outcome === 'failed');
  const after = ops.filter((o) => o.startMs >= injection.faultAtMs);
  const firstGrantAfter = after.find((o) => o.kind === 'acquire' && o.outcome === 'ok');
  const lastUnavailable = unavailable.filter((o) => o.startMs >= injection.faultAtMs - 1_000).at(-1);
  const late = unavailable.filter((o) => o.startMs > injection.blindUntilMs + 3_000);
  if (late.length > 0) {
    const byWhat = new Map<string, number>();
    for (const o of late)
      byWhat.set(`${o.kind}@i${o.instance}:${o.status ?? 'none'}`, (byWhat.get(`${o.kind}@i${o.instance}:${o.status ?? 'none'}`) ?? 0) + 1);
    console.log(`[faults] ${options.name}: 503 or no answer 3 s after the blind window:`, Object.fromEntries(byWhat));
  }
  const overlapsWithGrantsBeforeFault = report.violations.overlaps.filter(
    (o) => answeredBefore.has(o.first) || answeredBefore.has(o.second),
  ).length;

  return {
    name: options.name,
    operations: driver.ops.length,
    faults: injection.description,
    counts: report.counts,
    extraViolations: {},
    figures: {
      grants: grants.length,
      grantsBeforeFault: answeredBefore.size,
      overlapsWithGrantsBeforeFault,
      answered503OrNoAnswer: unavailable.length,
      firstGrantAfterFaultMs: firstGrantAfter ? Math.round(firstGrantAfter.endMs - injection.faultAtMs) : -1,
      last503AfterFaultMs: lastUnavailable ? Math.round(lastUnavailable.endMs - injection.faultAtMs) : -1,
      driverMaxLagMs: Math.round(driver.maxLagMs),
    },
    staleWritesAccepted: report.counts.staleWritesAccepted,
    staleWritesRejected: report.staleWritesRejected,
    report,
    overlapsWithGrantsBeforeFault,
    injection,
  };
}

/** The Redis key prefix of the instances replicatedRedisEnv describes. */
export const REDIS_KEY_PREFIX = 'faults:';

/**
 * The env of a keyholder instance on a replicated Redis (given by `connection`, the Sentinel or
 * Cluster variables): `acks` replica acknowledgements, and timeouts short enough that a dead store
 * shows within a fraction of a second instead of the defaults' seconds.
 */
export function replicatedRedisEnv(connection: Record<string, string>, acks: number): Record<string, string> {
  return {
    ...connection,
    REDIS_MIN_REPLICA_ACKS: String(acks),
    REDIS_REPLICA_ACK_TIMEOUT_MS: '100',
    REDIS_COMMAND_TIMEOUT_MS: '250',
    REDIS_KEY_PREFIX,
    LOG_LEVEL: 'warn',
  };
}

/** Starts three keyholder instances with `env`, runs `use` with their URLs, then stops them with SIGKILL. */
export async function withInstances<T>(env: Record<string, string>, use: (urls: readonly string[]) => Promise<T>): Promise<T> {
  const instances: KeyholderProcess[] = [];
  try {
    for (let i = 0; i < 3; i++) instances.push(await KeyholderProcess.start({ env }));
    return await use(instances.map((i) => i.url));
  } finally {
    await Promise.all(instances.map((i) => i.stop('SIGKILL')));
  }
}
