import { setTimeout as sleep } from 'node:timers/promises';
import { checkHistory, DEFAULT_CHECK_OPTIONS, type CheckReport, type ViolationKind } from './checker.js';
import type { Cluster } from './cluster.js';
import { Driver, type DriverOptions } from './driver.js';
import type { LockOp } from './history.js';

/**
 * The fault scenarios. Each runs the driver against a cluster, injects its faults, checks the history
 * and returns its figures; the test files decide the scale and assert on the counts.
 */

export type Scale = 'short' | 'long';

export interface ScenarioResult {
  readonly name: string;
  readonly operations: number;
  readonly faults: string;
  readonly counts: Record<ViolationKind, number>;
  /** Scenario-specific violations (must be 0). */
  readonly extraViolations: Record<string, number>;
  /** Figures reported but not violations (e.g. overlaps expected after data loss). */
  readonly figures: Record<string, number>;
  readonly staleWritesAccepted: number;
  readonly staleWritesRejected: number;
  readonly report?: CheckReport;
}

export const TTL_MS = 1000;
const KEYS = ['k0', 'k1', 'k2', 'k3', 'k4', 'k5'];
const CLIENTS = 32;

const lockOps = (d: Driver) => d.ops.filter((op): op is LockOp => op.type === 'lock');

/**
 * The most the recording process's own stalls may excuse an answer that looks expired on arrival: half
 * the lease, the service's own late-reply line. The excuse is what the run measured (driver.maxLagMs),
 * but never more than this, so a slow machine cannot hide a grant handed out after its lease ended.
 */
export const MAX_OBSERVER_LAG_MS = TTL_MS / 2;

/**
 * The operations without a certain answer, counted by why: the 503's problem code (store_unavailable,
 * overloaded, ...), or `noAnswer` for a call that got no HTTP answer at all. A 503 `overloaded` is the
 * instance refusing work before touching the store, a different cause from a store it could not reach.
 */
function byCode(prefix: string, ops: readonly LockOp[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const o of ops) {
    const name = `${prefix}_${o.outcome === 'failed' ? 'noAnswer' : (o.code ?? `status${o.status}`)}`;
    counts[name] = (counts[name] ?? 0) + 1;
  }
  return counts;
}

/** `maxObserverLagMs`: half the lease of the scenario's grants (MAX_OBSERVER_LAG_MS for TTL_MS leases). */
function check(driver: Driver, maxObserverLagMs = MAX_OBSERVER_LAG_MS): CheckReport {
  const observerLagMs = Math.min(driver.maxLagMs, maxObserverLagMs);
  return checkHistory(
    { ops: driver.ops, faults: driver.faults },
    { ...DEFAULT_CHECK_OPTIONS, observerLagMs, observerStalls: driver.stalls },
  );
}

function duration(scale: Scale, shortMs: number, longMs: number): number {
  return scale === 'short' ? shortMs : longMs;
}

function keysFor(prefix: string): string[] {
  return KEYS.map((k) => `${prefix}-${k}`);
}

/** A driver with the scenarios' common settings (CLIENTS clients, TTL_MS leases) over `keys`. */
function driverFor(cluster: Cluster, keys: string | string[], durationMs: number, more: Partial<DriverOptions> = {}): Driver {
  return new Driver({
    urls: cluster.urls,
    clients: CLIENTS,
    keys: typeof keys === 'string' ? keysFor(keys) : keys,
    ttlMs: TTL_MS,
    durationMs,
    ...more,
  });
}

function result(
  name: string,
  driver: Driver,
  faults: string,
  extraViolations: Record<string, number> = {},
  figures: Record<string, number> = {},
  report: CheckReport = check(driver),
): ScenarioResult {
  return {
    name,
    operations: driver.ops.length,
    faults,
    counts: report.counts,
    extraViolations,
    figures: { ...figures, driverMaxLagMs: Math.round(driver.maxLagMs) },
    staleWritesAccepted: report.counts.staleWritesAccepted,
    staleWritesRejected: report.staleWritesRejected,
    report,
  };
}

/** 1. No faults at all: the promise in its plainest form. */
export async function baseline(cluster: Cluster, scale: Scale): Promise<ScenarioResult> {
  // A quarter of the leases are lock sets of two keys: all-or-nothing, and mutual exclusion with plain locks.
  const driver = driverFor(cluster, 'base', duration(scale, 4_000, 20_000), { setFraction: 0.25 });
  await driver.run();
  const ops = lockOps(driver);
  return result(
    '1 baseline',
    driver,
    'none',
    {},
    {
      grants: ops.filter((o) => o.kind === 'acquire' && o.outcome === 'ok').length,
      lockSetGrants: new Set(ops.filter((o) => o.kind === 'acquire' && o.outcome === 'ok' && o.set).map((o) => o.set?.id)).size,
      unavailable: ops.filter((o) => o.outcome === 'unavailable' || o.outcome === 'failed').length,
      ...byCode(
        'unavailable',
        ops.filter((o) => o.outcome === 'unavailable' || o.outcome === 'failed'),
      ),
    },
  );
}

/** 2. A few clients stop right after a grant for 1.5 to 3 TTLs, then write, renew and release as if nothing happened. */
export async function pausedClient(cluster: Cluster, scale: Scale): Promise<ScenarioResult> {
  // Whichever client is granted a lock first once a pause is due pauses: on a busy machine one given
  // client may not be granted anything in a short run, and the scenario would measure nothing.
  let pausesLeft = scale === 'short' ? 1 : 6;
  const pausing = new Set<number>();
  // One pause at a time: two paused holders of one key in a row would fence nothing (the resource has
  // not seen the newer token yet; see the limits in docs/safety.md), which is not what this scenario measures.
  let nextPauseAtMs = 300;
  const driver = driverFor(cluster, 'pause', duration(scale, 4_500, 22_000), {
    setFraction: 0.25,
    // Each chosen client pauses once, on a grant some way into the run.
    pauseAfterGrant: (c) => {
      const now = driver.clock.nowMs();
      if (pausesLeft === 0 || pausing.has(c) || now < nextPauseAtMs) return 0;
      pausesLeft--;
      pausing.add(c);
      const pauseMs = TTL_MS * (1.5 + Math.random() * 1.5);
      nextPauseAtMs = now + pauseMs + 300;
      return pauseMs;
    },
  });
  const { paused } = await driver.run();
  return result(
    `2 paused client (${paused.length} pauses)`,
    driver,
    `${paused.length} client pauses of 1.5-3 x TTL`,
    {
      pausedRenewNot409: paused.filter((p) => p.renewStatus !== 409).length,
      pausedReleaseNot409: paused.filter((p) => p.releaseStatus !== 409).length,
    },
    {
      pauses: paused.length,
      pausedWritesRejected: paused.filter((p) => !p.writeAccepted).length,
      pausedWritesAcceptedNobodyNewer: paused.filter((p) => p.writeAccepted).length,
    },
  );
}

/** 3. A keyholder instance is stopped (SIGSTOP) for 2 TTLs with requests in flight, then continued. */
export async function pausedInstance(cluster: Cluster, scale: Scale): Promise<ScenarioResult> {
  const pauses = scale === 'short' ? 1 : 3;
  const driver = driverFor(cluster, 'ipause', duration(scale, 4_000, 6_000 * pauses + 2_000));
  const before = cluster.instances.map((_, i) => cluster.lateAnswersCaught(i));
  const faults = (async () => {
    for (let n = 0; n < pauses; n++) {
      await sleep(1_500);
      const i = n % cluster.instances.length;
      const start = driver.clock.nowMs();
      cluster.instances[i]?.pause();
      await sleep(2 * TTL_MS);
      cluster.instances[i]?.resume();
      driver.fault('instance SIGSTOP', i, start, driver.clock.nowMs(), 'some');
      await sleep(2_500);
    }
  })();
  await Promise.all([driver.run(), faults]);
  // Give the resumed instances a moment to flush their logs.
  await sleep(300);
  const late = cluster.instances.reduce((sum, _, i) => sum + cluster.lateAnswersCaught(i) - (before[i] ?? 0), 0);
  const ops = lockOps(driver);
  const answeredAfterPause = ops.filter((o) =>
    driver.faults.some((f) => f.instance === o.instance && o.startMs < f.endMs && o.endMs > f.endMs),
  );
  return result(
    `3 paused instance`,
    driver,
    `${pauses} SIGSTOP of 2 x TTL`,
    {},
    {
      lateAnswersCaught: late,
      inFlightAcrossPause: answeredAfterPause.length,
      inFlightAnswered503: answeredAfterPause.filter((o) => o.outcome === 'unavailable').length,
      inFlightAnswered200: answeredAfterPause.filter((o) => o.outcome === 'ok').length,
    },
  );
}

/** 4. A keyholder instance is killed (-9) mid-traffic: the leases it granted must run out within TTL. */
export async function killedInstance(cluster: Cluster, scale: Scale): Promise<ScenarioResult> {
  const victim = cluster.instances.length - 1;
  let alive = cluster.instances.map((_, i) => i);
  const keys = keysFor('kill');
  const driver = driverFor(cluster, keys, duration(scale, 5_000, 12_000), { liveInstances: () => alive });
  const boundMs = 1_000;
  let killAt = 0;
  let lastVictimLeaseSeenAt = 0;
  let probes = 0;
  const victimTokens = new Set<number>();
  const faults = (async () => {
    await sleep(duration(scale, 1_500, 4_000));
    killAt = driver.clock.nowMs();
    await cluster.instances[victim]?.stop('SIGKILL');
    driver.fault('instance SIGKILL', victim, killAt, killAt, 'some');
    alive = alive.filter((i) => i !== victim);
    // Watch every key through a live instance until well past TTL + bound.
    const watchUntil = killAt + TTL_MS + boundMs + 1_000;
    while (driver.clock.nowMs() < watchUntil) {
      const states = await Promise.all(keys.map((k) => inspect(cluster.urls[0] as string, k)));
      probes++;
      for (const s of states) {
        if (s?.holder?.endsWith(`@i${victim}`)) {
          lastVictimLeaseSeenAt = driver.clock.nowMs();
          if (typeof s.fencingToken === 'number') victimTokens.add(s.fencingToken);
        }
      }
      await sleep(25);
    }
  })();
  await Promise.all([driver.run(), faults]);
  const clearedAfterMs = lastVictimLeaseSeenAt === 0 ? 0 : lastVictimLeaseSeenAt - killAt;
  return result(
    '4 killed instance',
    driver,
    '1 SIGKILL of a keyholder',
    {
      victimLeaseOutlivedTtlPlusBound: clearedAfterMs > TTL_MS + boundMs ? 1 : 0,
    },
    {
      victimLeasesSeenAfterKill: victimTokens.size,
      lastVictimLeaseSeenMsAfterKill: Math.round(clearedAfterMs),
      inspectProbes: probes,
    },
  );
}

async function inspect(url: string, key: string): Promise<{ holder?: string | null; fencingToken?: number } | null> {
  try {
    const res = await fetch(`${url}/v1/locks/${key}`, { signal: AbortSignal.timeout(2_000) });
    if (res.status !== 200) return null;
    const body = (await res.json()) as { held: boolean; holder?: string | null; fencingToken?: number };
    return body.held ? body : null;
  } catch {
    return null;
  }
}

/** 5. Redis (with an append-only file) is killed -9 and restarted several times. */
export async function redisRestarts(cluster: Cluster, scale: Scale): Promise<ScenarioResult> {
  const restarts = scale === 'short' ? 2 : 5;
  const periodMs = scale === 'short' ? 2_500 : 4_000;
  const recoverySlackMs = 3_000;
  const driver = driverFor(cluster, 'aof', periodMs * (restarts + 1), { setFraction: 0.25 });
  const downs: Array<{ killAt: number; readyAt: number }> = [];
  const faults = (async () => {
    for (let n = 0; n < restarts; n++) {
      await sleep(periodMs - 700);
      const killAt = driver.clock.nowMs();
      await cluster.redis.kill('SIGKILL');
      // Until the kill has taken effect Redis may still answer: the blind window starts once it exited.
      const deadAt = driver.clock.nowMs();
      await sleep(500);
      // Redis can answer from the moment its process starts; launch() returns only once this test's own
      // probe got a PING through, by which time keyholder may rightly have served a request. The window
      // in which no answer is possible ends when the restart begins.
      const restartAt = driver.clock.nowMs();
      await cluster.redis.launch();
      const readyAt = driver.clock.nowMs();
      downs.push({ killAt, readyAt });
      driver.fault('redis down', null, deadAt, restartAt, 'none');
    }
  })();
  // While Redis is up it can still be slow: every write waits for its fsync (appendfsync always), and a
  // disk shared with other work can stall it for longer than the instances' command timeout. Their 503s
  // then fail closed, as they should. A probe writes through its own connection all along; the spans in
  // which its writes stalled are measured, and 503s inside them are counted apart from the ones this
  // scenario looks for (an instance that stays unavailable once Redis is back).
  const slow: Array<{ from: number; to: number }> = [];
  let running = true;
  const probe = (async () => {
    const client = cluster.redis.client();
    client.on('error', () => undefined);
    try {
      while (running) {
        const from = driver.clock.nowMs();
        const answered = await client.set('faults:probe', String(from)).then(
          () => true,
          () => false,
        );
        const to = driver.clock.nowMs();
        // Only a write Redis did answer says it was up but slow (one that failed met it down). The probe
        // is one write among the instances' many, so half the timeout already marks a stall, and a call
        // that timed out may have been sent up to a timeout before the stall was seen, or end one after.
        if (answered && to - from > cluster.commandTimeoutMs / 2)
          slow.push({ from: from - cluster.commandTimeoutMs, to: to + cluster.commandTimeoutMs });
        await sleep(20);
      }
    } finally {
      client.disconnect();
    }
  })();
  await Promise.all([driver.run(), faults]);
  running = false;
  await probe;
  const ops = lockOps(driver);
  const unavailable = ops.filter((o) => o.outcome === 'unavailable' || o.outcome === 'failed');
  const whileUpAny = unavailable.filter((o) => !downs.some((d) => o.endMs >= d.killAt && o.startMs <= d.readyAt + recoverySlackMs));
  const whileSlow = whileUpAny.filter((o) => slow.some((w) => o.endMs >= w.from && o.startMs <= w.to));
  const whileUp = whileUpAny.filter((o) => !whileSlow.includes(o));
  // Recovery: per restart and instance, from Redis ready to the first certain answer (200 or 409).
  // On a loaded machine the last restart can come back after the traffic ended (launching Redis took a
  // while): an instance the traffic no longer reached is asked directly, and its recovery counts from
  // Redis ready or the first ask, whichever is later. What happened is measured, not assumed.
  const recoveries: number[] = [];
  for (const d of downs) {
    for (let i = 0; i < cluster.instances.length; i++) {
      const first = ops.find((o) => o.instance === i && o.startMs >= d.readyAt && (o.outcome === 'ok' || o.outcome === 'conflict'));
      const reachedAfter = ops.some((o) => o.instance === i && o.startMs >= d.readyAt + recoverySlackMs);
      if (first) recoveries.push(first.endMs - d.readyAt);
      else if (reachedAfter) recoveries.push(Number.POSITIVE_INFINITY);
      else
        recoveries.push(await probeRecovery(cluster.urls[i] ?? '', Math.max(d.readyAt, driver.clock.nowMs()), driver, recoverySlackMs * 3));
    }
  }
  const maxRecoveryMs = Math.max(0, ...recoveries);
  return result(
    `5 Redis restarts (AOF)`,
    driver,
    `${restarts} Redis kill -9 + restart`,
    {
      // A Redis that is up but slow to answer (a loaded machine) also gets a 503: that fails closed and is
      // not what this counts. Tolerated up to 1% of operations; every one is reported.
      unavailableWhileRedisUpOver1pc: Math.max(0, whileUp.length - Math.floor(ops.length / 100)),
      recoveryOverBound: recoveries.filter((r) => r > recoverySlackMs).length,
    },
    {
      answered503OrNoAnswer: unavailable.length,
      unavailableWhileRedisUp: whileUp.length,
      ...byCode('unavailableWhileRedisUp', whileUp),
      unavailableWhileRedisSlow: whileSlow.length,
      redisSlowSpans: slow.length,
      maxRecoveryMs: Math.round(maxRecoveryMs),
    },
  );
}

/** ms from `fromMs` (driver clock) until the instance gives a certain answer (200 or 409); Infinity past `limitMs`. */
async function probeRecovery(url: string, fromMs: number, driver: Driver, limitMs: number): Promise<number> {
  for (let n = 0; driver.clock.nowMs() - fromMs < limitMs; n++) {
    const status = await fetch(`${url}/v1/locks/recovery-probe-${n}/acquire`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ttlMs: 100 }),
      signal: AbortSignal.timeout(2_000),
    }).then(
      async (res) => {
        await res.arrayBuffer();
        return res.status;
      },
      () => 0,
    );
    if (status === 200 || status === 409) return driver.clock.nowMs() - fromMs;
    await sleep(50);
  }
  return Number.POSITIVE_INFINITY;
}

/** 6. Redis without persistence loses its data: restarts and FLUSHALL. Overlaps are expected; fencing must hold. */
export async function redisDataLoss(cluster: Cluster, scale: Scale): Promise<ScenarioResult> {
  const losses = scale === 'short' ? 2 : 4;
  const periodMs = 3_000;
  const driver = driverFor(cluster, 'loss', periodMs * (losses + 1));
  const faults = (async () => {
    for (let n = 0; n < losses; n++) {
      await sleep(periodMs);
      const start = driver.clock.nowMs();
      if (n % 2 === 0) {
        // Restarted at once, so the window in which no answer is possible is only the instant between
        // the old process's exit and the new one's start (once started, Redis may answer before this
        // test's own probe gets through; see redisRestarts).
        await cluster.redis.kill();
        const restartAt = driver.clock.nowMs();
        await cluster.redis.launch();
        driver.fault('redis restart, no persistence', null, restartAt, restartAt, 'none');
      } else {
        const client = cluster.redis.client();
        await client.flushall();
        client.disconnect();
        driver.fault('FLUSHALL', null, start, start, 'some');
      }
    }
  })();
  await Promise.all([driver.run(), faults]);
  const report = check(driver);
  return result(
    '6 Redis data loss',
    driver,
    `${Math.ceil(losses / 2)} restarts without persistence + ${Math.floor(losses / 2)} FLUSHALL`,
    {},
    {
      overlapsAfterDataLoss: report.counts.overlaps,
      grantsDuringLeaseAfterDataLoss: report.counts.grantsDuringLease,
    },
    report,
  );
}

/**
 * 7. Network faults between one instance and Redis: delay past the command timeout, black hole,
 * connection resets mid-script, replies dropped for a long stretch, and replies dropped in short bursts
 * (a few replies lost on a connection that then carries on).
 */
export async function networkFaults(cluster: Cluster, scale: Scale): Promise<ScenarioResult> {
  const target = 0;
  const proxy = cluster.proxies[target];
  if (!proxy) throw new Error('no proxy');
  const windowMs = scale === 'short' ? 1_500 : 2_500;
  const gapMs = 2_000;
  const finalGapMs = 4_000;
  const kinds = ['delay', 'blackhole', 'resets', 'dropReplies', 'replyDropBursts'] as const;
  const rounds = scale === 'short' ? 1 : 2;
  const driver = driverFor(cluster, 'net', (windowMs + gapMs) * kinds.length * rounds + finalGapMs);
  const windows: Array<{ kind: string; startMs: number; endMs: number }> = [];
  let healedAt = Number.POSITIVE_INFINITY;
  const faults = (async () => {
    for (let r = 0; r < rounds; r++) {
      for (const kind of kinds) {
        await sleep(gapMs);
        // The proxy runs in another process: a fault is in force once its change is acknowledged, so the
        // window opens after that, and closes after the heal is (a call wholly inside it met the fault).
        if (kind === 'delay') await proxy.set({ kind: 'delay', delayMs: 1_000 });
        if (kind === 'blackhole') await proxy.set({ kind: 'blackhole' });
        if (kind === 'dropReplies') await proxy.set({ kind: 'dropReplies' });
        const startMs = driver.clock.nowMs();
        if (kind === 'resets' || kind === 'replyDropBursts') {
          while (driver.clock.nowMs() - startMs < windowMs) {
            if (kind === 'resets') await proxy.resetAll();
            else {
              await proxy.set({ kind: 'dropReplies' });
              await sleep(10 + Math.random() * 20);
              await proxy.heal();
            }
            await sleep(50 + Math.random() * 150);
          }
        } else {
          await sleep(windowMs);
        }
        await proxy.heal();
        const endMs = driver.clock.nowMs();
        windows.push({ kind, startMs, endMs });
        // Inside resets and short drop bursts some calls get through, so a 200 there is legitimate.
        driver.fault(kind, target, startMs, endMs, kind === 'resets' || kind === 'replyDropBursts' ? 'some' : 'none');
      }
    }
    healedAt = driver.clock.nowMs();
  })();
  await Promise.all([driver.run(), faults]);
  const ops = lockOps(driver);
  const inside = (o: LockOp, w: { startMs: number; endMs: number }) => o.startMs >= w.startMs && o.endMs <= w.endMs;
  let affected503 = 0;
  let othersServed = 0;
  let windowsWithout503 = 0;
  let windowsWithoutOthersServing = 0;
  for (const w of windows) {
    const a = ops.filter((o) => o.instance === target && inside(o, w) && o.outcome === 'unavailable').length;
    const b = ops.filter((o) => o.instance !== target && inside(o, w) && o.outcome === 'ok').length;
    affected503 += a;
    othersServed += b;
    if (a === 0) windowsWithout503++;
    if (b === 0) windowsWithoutOthersServing++;
  }
  const servedAfterHeal = ops.filter((o) => o.instance === target && o.startMs >= healedAt && o.outcome === 'ok').length;
  const stats = await proxy.stats();
  return result(
    '7 network faults',
    driver,
    `${windows.length} proxy faults on 1 of 3 instances (${kinds.join(', ')})`,
    {
      windowsWhereAffectedNever503: windowsWithout503,
      windowsWhereOthersStopped: windowsWithoutOthersServing,
      affectedNeverRecovered: servedAfterHeal === 0 ? 1 : 0,
    },
    {
      affectedInstance503s: affected503,
      othersServed200s: othersServed,
      affectedServed200sAfterHeal: servedAfterHeal,
      connectionResets: stats.resets,
      bytesDropped: stats.bytesDropped,
    },
  );
}

/**
 * 8. Renews and releases with the owner tokens of expired leases, at scale: none may succeed. Half the
 * leases are re-taken by someone else first. The operation (renew or release) and the lease are chosen
 * independently, so each operation meets both re-taken and untouched leases. Every call is recorded
 * and the history checked like the other scenarios; afterwards each re-taken lease must still be its
 * new holder's, and no untouched key may be held again.
 */
export async function expiredLeaseOps(cluster: Cluster, scale: Scale): Promise<ScenarioResult> {
  const total = scale === 'short' ? 2_000 : 10_000;
  const leases = 200;
  // Short, so they run out soon, but not so short that a grant's own trip (answered at up to half the
  // lease, then written and read on a busy 2-core machine) outlasts it: every grant is checked for
  // arriving expired like any other, and at 100 ms a starved moment did that.
  const ttlMs = 300;
  const retakeTtlMs = 60_000;
  const urls = cluster.urls;
  const driver = new Driver({ urls, clients: 0, keys: [], ttlMs, durationMs: 0 });
  const instanceOf = (n: number) => n % urls.length;
  interface Stale {
    readonly key: string;
    readonly client: number;
    readonly grantId: number;
    readonly ownerToken: string;
    retakenToken?: number;
    /** The re-take got no certain answer (503 or none): the key may or may not be held by it now. */
    retakeUncertain?: boolean;
  }
  const stale: Stale[] = [];
  const attempts = { renewRetaken: 0, renewUntouched: 0, releaseRetaken: 0, releaseUntouched: 0 };
  const statuses = new Map<number, number>();
  let succeeded = 0;
  let next = 0;
  const worker = async () => {
    while (next < total) {
      const n = next++;
      const s = stale[n % stale.length];
      if (!s) return;
      // Lease by n, operation by the pass over the leases: independent of each other and of re-taking.
      const kind = Math.floor(n / stale.length) % 2 === 0 ? 'renew' : 'release';
      attempts[`${kind}${s.retakenToken === undefined ? 'Untouched' : 'Retaken'}`]++;
      const body = kind === 'renew' ? { ownerToken: s.ownerToken, ttlMs: retakeTtlMs } : { ownerToken: s.ownerToken };
      const { op } = await driver.call(kind, s.client, s.key, instanceOf(n), s.grantId, kind === 'renew' ? retakeTtlMs : ttlMs, body);
      statuses.set(op.status ?? 0, (statuses.get(op.status ?? 0) ?? 0) + 1);
      if (op.outcome === 'ok') succeeded++;
    }
  };
  // Its calls are made here, not through driver.run: the recording process's own stalls are measured all
  // the same, so that an answer read late by a stalled recorder is not taken for a grant that arrived expired.
  await driver.measured(async () => {
    for (let i = 0; i < leases; i += 20) {
      const batch = await Promise.all(
        Array.from({ length: 20 }, async (_, j) => {
          const n = i + j;
          const key = `expired-${n}`;
          const { op, ownerToken } = await driver.call('acquire', n, key, instanceOf(n), 0, ttlMs, { ttlMs });
          return ownerToken === undefined ? null : { key, client: n, grantId: op.id, ownerToken };
        }),
      );
      for (const b of batch) if (b) stale.push(b);
    }
    await sleep(ttlMs * 3);
    // Every other lease gets a new, live holder: a stale token must not touch someone else's lease either.
    for (const [i, s] of stale.entries()) {
      if (i % 2 !== 0) continue;
      const { op } = await driver.call('acquire', leases + i, s.key, 0, 0, retakeTtlMs, { ttlMs: retakeTtlMs });
      if (op.outcome === 'ok') s.retakenToken = op.fencingToken;
      else if (op.outcome === 'unavailable' || op.outcome === 'failed') s.retakeUncertain = true;
    }
    await Promise.all(Array.from({ length: 32 }, worker));
  });
  // The end state: re-taken leases untouched, untouched keys still free.
  let retakenLeasesDisturbed = 0;
  let untouchedKeysHeld = 0;
  for (const s of stale) {
    const state = await inspect(urls[0] as string, s.key);
    if (s.retakenToken !== undefined && state?.fencingToken !== s.retakenToken) retakenLeasesDisturbed++;
    // A re-take answered 503 may have been granted all the same (its reply lost or late): only keys
    // nobody may hold are checked.
    if (s.retakenToken === undefined && !s.retakeUncertain && state !== null) untouchedKeysHeld++;
  }
  const retaken = stale.filter((s) => s.retakenToken !== undefined).length;
  const retakesUncertain = stale.filter((s) => s.retakeUncertain).length;
  return result(
    '8 expired-lease ops',
    driver,
    `${stale.length} expired leases (${retaken} retaken)`,
    { expiredOpsSucceeded: succeeded, retakenLeasesDisturbed, untouchedKeysHeld },
    // Anything but 200 is safe; 409 is the expected answer, a 503 only says the store was slow to answer.
    { ...attempts, retakesUncertain, ...Object.fromEntries([...statuses].map(([s, n]) => [`status${s}`, n])) },
    // The excuse for the recorder's stalls is capped at half of these shorter leases, as at half of TTL_MS elsewhere.
    check(driver, ttlMs / 2),
  );
}

/**
 * 9. Semaphores and read/write locks under faults: clients take semaphore permits (limit 3) and
 * read/write leases (a quarter of them writes) through all three instances, a few of them stop right
 * after a grant for 1.5 to 3 TTLs and carry on, and Redis (with an append-only file) is killed -9 and
 * restarted. The checker's permit rules must hold throughout: never more than the limit of permits
 * surely held at once, never a writer with anyone else, tokens in grant order.
 */
export async function permitsUnderFaults(cluster: Cluster, scale: Scale): Promise<ScenarioResult> {
  const durationMs = duration(scale, 6_000, 20_000);
  let pausesLeft = scale === 'short' ? 2 : 6;
  let grantsSeen = 0;
  // Every 10th grant pauses its client, until the scenario's pauses are used up.
  const pauseAfterGrant = () => {
    if (pausesLeft === 0 || ++grantsSeen % 10 !== 0) return 0;
    pausesLeft--;
    return TTL_MS * (1.5 + Math.random() * 1.5);
  };
  // Callers wait in the FIFO queue (up to 2 TTLs): a writer gets in between readers, and hand-offs run under the faults.
  const common = { clients: CLIENTS / 2, pauseAfterGrant, waitMs: 2 * TTL_MS };
  const semaphores = driverFor(cluster, keysFor('sem').slice(0, 2), durationMs, { ...common, primitive: { kind: 'semaphore', limit: 3 } });
  const rwlocks = driverFor(cluster, keysFor('rw').slice(0, 2), durationMs, { ...common, primitive: { kind: 'rwlock', writeShare: 0.25 } });
  const restart = (async () => {
    await sleep(durationMs / 2);
    await cluster.redis.kill('SIGKILL');
    const deadAt = [semaphores.clock.nowMs(), rwlocks.clock.nowMs()];
    await sleep(300);
    const restartAt = [semaphores.clock.nowMs(), rwlocks.clock.nowMs()];
    await cluster.redis.launch();
    semaphores.fault('redis down', null, deadAt[0] as number, restartAt[0] as number, 'none');
    rwlocks.fault('redis down', null, deadAt[1] as number, restartAt[1] as number, 'none');
  })();
  await Promise.all([semaphores.run(), rwlocks.run(), restart]);
  const reports = [check(semaphores), check(rwlocks)];
  const counts = Object.fromEntries(
    (Object.keys(reports[0]?.counts ?? {}) as ViolationKind[]).map((k) => [k, reports.reduce((sum, r) => sum + r.counts[k], 0)]),
  ) as Record<ViolationKind, number>;
  const grants = (d: Driver) => lockOps(d).filter((o) => o.kind === 'acquire' && o.outcome === 'ok');
  const writes = grants(rwlocks).filter((o) => o.permit?.kind === 'rwlock' && o.permit.mode === 'write').length;
  return {
    name: '9 semaphores and read/write locks',
    operations: semaphores.ops.length + rwlocks.ops.length,
    faults: `client pauses of 1.5-3 x TTL, 1 Redis kill -9 + restart`,
    counts,
    extraViolations: {},
    figures: {
      semaphoreGrants: grants(semaphores).length,
      rwlockReadGrants: grants(rwlocks).length - writes,
      rwlockWriteGrants: writes,
      pauses: (scale === 'short' ? 2 : 6) - pausesLeft,
      answered503OrNoAnswer: [...lockOps(semaphores), ...lockOps(rwlocks)].filter(
        (o) => o.outcome === 'unavailable' || o.outcome === 'failed',
      ).length,
      driverMaxLagMs: Math.round(Math.max(semaphores.maxLagMs, rwlocks.maxLagMs)),
    },
    staleWritesAccepted: counts.staleWritesAccepted,
    staleWritesRejected: 0,
  };
}
