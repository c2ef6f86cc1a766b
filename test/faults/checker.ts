import type { FaultWindow, History, LockOp, PermitShape, WriteOp } from './history.js';

/**
 * The history checker: a pure function from a recorded history to the safety violations in it. It
 * trusts nothing the service says about itself; it reasons only from what callers observed and when.
 *
 * A grant is "surely held" from the moment its acquire answer arrived until acquire start + TTL minus a
 * drift margin (the store started the lease after the request left, so it cannot end earlier), extended
 * the same way by each successful renew, and cut short at the start of its release.
 */

export interface CheckOptions {
  /**
   * How far the store's clock may run ahead of the run's clock over one lease, in ms. Store and callers
   * share one host in these tests, so this only covers rounding and scheduling: a few ms would do.
   */
  readonly driftMarginMs: number;
  /**
   * The longest the recording process itself was stalled (event-loop delay) during the run, in ms. An
   * answer is "expired on arrival" only if it was late by more than this: a stalled caller reading a fresh
   * answer late is a paused client, not a late answer from the service.
   */
  readonly observerLagMs: number;
  /**
   * When the recording process's event loop did not run (wall clock, ms): an answer it read at the end of
   * such a window may have come at any time in it. An answer's lateness is excused by as much of these
   * windows as lies between its lease's end and its reading, on top of observerLagMs: only the recorder's
   * own stalls at that very time, so a slow machine cannot hide a late grant outside them.
   */
  readonly observerStalls?: readonly ObserverStall[];
}

/** A window in which the recording process's event loop did not run (Driver.stalls). */
export interface ObserverStall {
  readonly fromWallMs: number;
  readonly toWallMs: number;
}

/** How much of `stalls` lies inside [fromMs, toMs]. */
function stalledWithin(stalls: readonly ObserverStall[], fromMs: number, toMs: number): number {
  let ms = 0;
  for (const s of stalls) ms += Math.max(0, Math.min(toMs, s.toWallMs) - Math.max(fromMs, s.fromWallMs));
  return ms;
}

export const DEFAULT_CHECK_OPTIONS: CheckOptions = Object.freeze({ driftMarginMs: 25, observerLagMs: 0 });

export interface Grant {
  readonly id: number;
  readonly client: number;
  readonly key: string;
  readonly fencingToken: number;
  readonly acquireStartMs: number;
  readonly acquireEndMs: number;
  /** Surely-held window; empty when endMs <= startMs. */
  readonly heldFromMs: number;
  readonly heldUntilMs: number;
  /** A semaphore permit or a read/write lease (absent: a lock). */
  readonly permit?: PermitShape;
}

export interface Overlap {
  readonly key: string;
  readonly first: number;
  readonly second: number;
  readonly fromMs: number;
  readonly untilMs: number;
}

export interface Violations {
  /** Two grants whose surely-held windows intersect. */
  overlaps: Overlap[];
  /** A grant whose whole acquire ran while a lower-token lease was surely held. */
  grantsDuringLease: Array<{ key: string; holder: number; grant: number }>;
  /** A grant that started after another grant had ended, with a lower token. */
  tokenRegressions: Array<{ key: string; earlier: number; later: number }>;
  /** Two grants on one key with the same token. */
  duplicateTokens: Array<{ key: string; fencingToken: number; grants: number[] }>;
  /** The resource accepted a write whose token was below one already handed to a caller. */
  staleWritesAccepted: Array<{ key: string; write: number; fencingToken: number; newerToken: number }>;
  /** A 200 acquire or renew whose lease had already ended when the answer arrived. */
  expiredOnArrival: Array<{ key: string; op: number; lateByMs: number }>;
  /** A 200 for a request made and answered wholly inside a window where the instance could get no answer from the store. */
  uncertainSuccesses: Array<{ op: number; instance: number; fault: string }>;
  /**
   * Lock set all-or-nothing: a granted set without a fencing token for every key it asked for (a partial
   * grant), or a set call whose keys' answers disagree. Holding a key of a set while someone else holds it
   * shows up as an overlap on that key (each key of a set is its own grant for the per-key checks).
   */
  lockSetPartial: Array<{ set: number; keys: readonly string[]; granted: readonly string[] }>;
  /** An instant at which more semaphore permits were surely held than its limit. */
  semaphoreOverLimit: Array<{ key: string; atMs: number; holders: number[]; limit: number }>;
  /** A write lease of a read/write lock surely held together with any other lease of it. */
  rwlockWriterShared: Array<{ key: string; writer: number; other: number; fromMs: number }>;
}

export type ViolationKind = keyof Violations;

export const VIOLATION_KINDS: readonly ViolationKind[] = [
  'overlaps',
  'grantsDuringLease',
  'tokenRegressions',
  'duplicateTokens',
  'staleWritesAccepted',
  'expiredOnArrival',
  'uncertainSuccesses',
  'lockSetPartial',
  'semaphoreOverLimit',
  'rwlockWriterShared',
];

export interface KeyFigures {
  grants: number;
  writesAccepted: number;
  writesRejected: number;
  /** Writes made after the writer's lease had surely ended (accepted only if nobody newer had a token yet). */
  writesAfterLeaseEnded: number;
}

export interface CheckReport {
  readonly perKey: Record<string, KeyFigures & { violations: Record<ViolationKind, number> }>;
  readonly violations: Violations;
  readonly counts: Record<ViolationKind, number>;
  readonly totalViolations: number;
  readonly staleWritesRejected: number;
  readonly grants: readonly Grant[];
}

function emptyViolations(): Violations {
  return {
    overlaps: [],
    grantsDuringLease: [],
    tokenRegressions: [],
    duplicateTokens: [],
    staleWritesAccepted: [],
    expiredOnArrival: [],
    uncertainSuccesses: [],
    lockSetPartial: [],
    semaphoreOverLimit: [],
    rwlockWriterShared: [],
  };
}

/** Builds each grant's surely-held window from its acquire, renews and release. */
export function buildGrants(history: History, options: CheckOptions = DEFAULT_CHECK_OPTIONS): Grant[] {
  const acquires = new Map<number, LockOp>();
  const followUps = new Map<number, LockOp[]>();
  for (const op of history.ops) {
    if (op.type !== 'lock') continue;
    if (op.kind === 'acquire') {
      if (op.outcome === 'ok' && op.fencingToken !== undefined) acquires.set(op.id, op);
    } else {
      const list = followUps.get(op.grantId) ?? [];
      list.push(op);
      followUps.set(op.grantId, list);
    }
  }
  const grants: Grant[] = [];
  for (const acq of acquires.values()) {
    let leaseEndLowerBoundMs = acq.startMs + acq.ttlMs;
    let releaseStartMs = Number.POSITIVE_INFINITY;
    for (const op of followUps.get(acq.id) ?? []) {
      // A renew that succeeded proves the lease was alive when the store ran it (after the renew left)
      // and now runs at least TTL from then; leases never come back once ended, so there is no gap.
      if (op.kind === 'renew' && op.outcome === 'ok') {
        leaseEndLowerBoundMs = Math.max(leaseEndLowerBoundMs, op.startMs + op.ttlMs);
      }
      // From the moment a caller sends release it no longer counts on the lock, whatever the answer.
      if (op.kind === 'release') releaseStartMs = Math.min(releaseStartMs, op.startMs);
    }
    grants.push({
      id: acq.id,
      client: acq.client,
      key: acq.key,
      fencingToken: acq.fencingToken as number,
      acquireStartMs: acq.startMs,
      acquireEndMs: acq.endMs,
      heldFromMs: acq.endMs,
      heldUntilMs: Math.min(leaseEndLowerBoundMs - options.driftMarginMs, releaseStartMs),
      ...(acq.permit ? { permit: acq.permit } : {}),
    });
  }
  return grants;
}

/** The checker: reads a history and reports every violation, per key and in total. Pure. */
export function checkHistory(history: History, options: CheckOptions = DEFAULT_CHECK_OPTIONS): CheckReport {
  const violations = emptyViolations();
  const grants = buildGrants(history, options);
  const grantsByKey = groupBy(grants, (g) => g.key);
  const writes = history.ops.filter((op): op is WriteOp => op.type === 'write');
  const writesByKey = groupBy(writes, (w) => w.key);

  for (const [key, keyGrants] of grantsByKey) {
    // Several holders at once are what semaphores and read/write locks are for: they have rules of their own.
    if (keyGrants.some((g) => g.permit)) checkPermitHolders(key, keyGrants, violations);
    else checkOverlaps(key, keyGrants, violations);
    checkTokenOrder(key, keyGrants, violations);
    checkDuplicates(key, keyGrants, violations);
  }
  for (const [key, keyWrites] of writesByKey) {
    checkStaleWrites(key, keyWrites, grantsByKey.get(key) ?? [], violations);
  }
  checkExpiredOnArrival(history, options, violations);
  checkUncertainSuccesses(history, violations);
  checkLockSets(history, violations);

  const counts = Object.fromEntries(VIOLATION_KINDS.map((k) => [k, violations[k].length])) as Record<ViolationKind, number>;
  const totalViolations = VIOLATION_KINDS.reduce((sum, k) => sum + counts[k], 0);

  const perKey: CheckReport['perKey'] = {};
  const keys = new Set([...grantsByKey.keys(), ...writesByKey.keys()]);
  const leaseEnds = leaseEndUpperBounds(history, options);
  for (const key of [...keys].sort()) {
    const keyWrites = writesByKey.get(key) ?? [];
    const perKind = Object.fromEntries(
      VIOLATION_KINDS.map((k) => [k, (violations[k] as Array<{ key?: string }>).filter((v) => v.key === key).length]),
    ) as Record<ViolationKind, number>;
    perKey[key] = {
      grants: grantsByKey.get(key)?.length ?? 0,
      writesAccepted: keyWrites.filter((w) => w.accepted).length,
      writesRejected: keyWrites.filter((w) => !w.accepted).length,
      writesAfterLeaseEnded: keyWrites.filter((w) => w.atMs > (leaseEnds.get(w.grantId) ?? Number.POSITIVE_INFINITY)).length,
      violations: perKind,
    };
  }
  const staleWritesRejected = writes.filter((w) => !w.accepted).length;
  return { perKey, violations, counts, totalViolations, staleWritesRejected, grants };
}

function groupBy<T>(items: readonly T[], keyOf: (item: T) => string): Map<string, T[]> {
  const map = new Map<string, T[]>();
  for (const item of items) {
    const key = keyOf(item);
    const list = map.get(key);
    if (list) list.push(item);
    else map.set(key, [item]);
  }
  return map;
}

function checkOverlaps(key: string, grants: readonly Grant[], out: Violations): void {
  const windows = grants.filter((g) => g.heldUntilMs > g.heldFromMs).sort((a, b) => a.heldFromMs - b.heldFromMs);
  const active: Grant[] = [];
  for (const g of windows) {
    // Drop windows that ended before this one starts; the rest intersect it.
    for (let i = active.length - 1; i >= 0; i--) if ((active[i] as Grant).heldUntilMs <= g.heldFromMs) active.splice(i, 1);
    for (const other of active) {
      out.overlaps.push({
        key,
        first: other.id,
        second: g.id,
        fromMs: g.heldFromMs,
        untilMs: Math.min(other.heldUntilMs, g.heldUntilMs),
      });
      // Was the second grant made (its whole acquire) while the lower-token lease was surely held?
      const [low, high] = other.fencingToken < g.fencingToken ? [other, g] : [g, other];
      if (low.heldFromMs <= high.acquireStartMs && high.acquireEndMs <= low.heldUntilMs) {
        out.grantsDuringLease.push({ key, holder: low.id, grant: high.id });
      }
    }
    active.push(g);
  }
  // A grant made wholly inside a lower-token lease whose own window is empty (its answer came late)
  // is still a grant the store should not have made.
  const held = grants.filter((g) => g.heldUntilMs > g.heldFromMs);
  for (const g of grants) {
    if (g.heldUntilMs > g.heldFromMs) continue;
    for (const low of held) {
      if (low.fencingToken < g.fencingToken && low.heldFromMs <= g.acquireStartMs && g.acquireEndMs <= low.heldUntilMs) {
        out.grantsDuringLease.push({ key, holder: low.id, grant: g.id });
      }
    }
  }
}

/**
 * Semaphores: at no instant more surely-held permits than the limit. Read/write locks: a write lease
 * never surely held together with another lease. A sweep over the windows' starts and ends.
 */
function checkPermitHolders(key: string, grants: readonly Grant[], out: Violations): void {
  const windows = grants.filter((g) => g.heldUntilMs > g.heldFromMs).sort((a, b) => a.heldFromMs - b.heldFromMs);
  const active: Grant[] = [];
  for (const g of windows) {
    for (let i = active.length - 1; i >= 0; i--) if ((active[i] as Grant).heldUntilMs <= g.heldFromMs) active.splice(i, 1);
    active.push(g);
    const shape = g.permit;
    if (shape?.kind === 'semaphore' && active.length > shape.limit) {
      out.semaphoreOverLimit.push({ key, atMs: g.heldFromMs, holders: active.map((a) => a.id), limit: shape.limit });
    }
    if (shape?.kind === 'rwlock') {
      for (const other of active) {
        if (other === g) continue;
        const otherWrites = other.permit?.kind === 'rwlock' && other.permit.mode === 'write';
        if (shape.mode === 'write' || otherWrites) {
          const writer = shape.mode === 'write' ? g : other;
          out.rwlockWriterShared.push({ key, writer: writer.id, other: writer === g ? other.id : g.id, fromMs: g.heldFromMs });
        }
      }
    }
  }
}

/** Grants in real-time order (one ended before the other started) must carry increasing tokens. */
function checkTokenOrder(key: string, grants: readonly Grant[], out: Violations): void {
  const byEnd = [...grants].sort((a, b) => a.acquireEndMs - b.acquireEndMs);
  // prefix[i] = the grant with the highest token among byEnd[0..i].
  const prefix: Grant[] = [];
  for (const g of byEnd) {
    const prev = prefix[prefix.length - 1];
    prefix.push(prev === undefined || g.fencingToken > prev.fencingToken ? g : prev);
  }
  for (const g of grants) {
    // Last grant that ended strictly before g started.
    let lo = 0;
    let hi = byEnd.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((byEnd[mid] as Grant).acquireEndMs < g.acquireStartMs) lo = mid + 1;
      else hi = mid;
    }
    const best = lo > 0 ? prefix[lo - 1] : undefined;
    if (best !== undefined && best.fencingToken > g.fencingToken) {
      out.tokenRegressions.push({ key, earlier: best.id, later: g.id });
    }
  }
}

function checkDuplicates(key: string, grants: readonly Grant[], out: Violations): void {
  const byToken = groupBy(grants, (g) => String(g.fencingToken));
  for (const [token, same] of byToken) {
    if (same.length > 1) out.duplicateTokens.push({ key, fencingToken: Number(token), grants: same.map((g) => g.id) });
  }
}

/**
 * A write is stale when a higher token had already been handed to a caller (its acquire answer arrived)
 * before the write: the resource must reject it. Whether the resource had already seen the higher token
 * depends on the newer holder; the driver writes first thing after acquire, in the same tick.
 */
function checkStaleWrites(key: string, writes: readonly WriteOp[], grants: readonly Grant[], out: Violations): void {
  const byEnd = [...grants].sort((a, b) => a.acquireEndMs - b.acquireEndMs);
  const maxTokenBefore: number[] = [];
  let max = Number.NEGATIVE_INFINITY;
  for (const g of byEnd) {
    max = Math.max(max, g.fencingToken);
    maxTokenBefore.push(max);
  }
  for (const w of writes) {
    if (!w.accepted) continue;
    let lo = 0;
    let hi = byEnd.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((byEnd[mid] as Grant).acquireEndMs < w.atMs) lo = mid + 1;
      else hi = mid;
    }
    const newest = lo > 0 ? (maxTokenBefore[lo - 1] as number) : Number.NEGATIVE_INFINITY;
    if (newest > w.fencingToken) {
      out.staleWritesAccepted.push({ key, write: w.id, fencingToken: w.fencingToken, newerToken: newest });
    }
  }
}

function checkExpiredOnArrival(history: History, options: CheckOptions, out: Violations): void {
  for (const op of history.ops) {
    if (op.type !== 'lock' || op.outcome !== 'ok' || op.kind === 'release') continue;
    if (op.expiresAtMs === undefined || op.receivedWallMs === undefined) continue;
    const stalled = options.observerStalls ? stalledWithin(options.observerStalls, op.expiresAtMs, op.receivedWallMs) : 0;
    if (op.expiresAtMs + options.observerLagMs + stalled <= op.receivedWallMs) {
      out.expiredOnArrival.push({ key: op.key, op: op.id, lateByMs: op.receivedWallMs - op.expiresAtMs });
    }
  }
}

function checkUncertainSuccesses(history: History, out: Violations): void {
  const blind = history.faults.filter((f) => f.replies === 'none');
  if (blind.length === 0) return;
  for (const op of history.ops) {
    if (op.type !== 'lock' || op.outcome !== 'ok') continue;
    const fault = blind.find(
      (f: FaultWindow) => (f.instance === null || f.instance === op.instance) && f.startMs <= op.startMs && op.endMs <= f.endMs,
    );
    if (fault) out.uncertainSuccesses.push({ op: op.id, instance: op.instance, fault: fault.kind });
  }
}

/**
 * Lock set all-or-nothing, per set call: every key it asked for has its op, all with one outcome, and a
 * granted set carries a fencing token for every key. (Mutual exclusion of each key against plain locks and
 * other sets is the per-key overlap check: a set's key is a grant like any other.)
 */
function checkLockSets(history: History, out: Violations): void {
  const calls = new Map<number, LockOp[]>();
  for (const op of history.ops) {
    if (op.type !== 'lock' || op.kind !== 'acquire' || op.set === undefined) continue;
    const list = calls.get(op.set.id) ?? [];
    list.push(op);
    calls.set(op.set.id, list);
  }
  for (const [id, ops] of calls) {
    const keys = (ops[0] as LockOp).set?.keys ?? [];
    const granted = ops.filter((op) => op.outcome === 'ok' && op.fencingToken !== undefined).map((op) => op.key);
    const outcomes = new Set(ops.map((op) => op.outcome));
    const covered = new Set(ops.map((op) => op.key));
    const whole = keys.every((k) => covered.has(k)) && ops.length === keys.length;
    if (!whole || outcomes.size > 1 || (outcomes.has('ok') && granted.length !== keys.length)) {
      out.lockSetPartial.push({ set: id, keys, granted });
    }
  }
}

/** Per grant, the latest its lease can have lasted: the last answer that extended it + TTL + drift. */
function leaseEndUpperBounds(history: History, options: CheckOptions): Map<number, number> {
  const ends = new Map<number, number>();
  for (const op of history.ops) {
    if (op.type !== 'lock' || op.outcome !== 'ok' || op.kind === 'release') continue;
    const end = op.endMs + op.ttlMs + options.driftMarginMs;
    ends.set(op.grantId, Math.max(ends.get(op.grantId) ?? Number.NEGATIVE_INFINITY, end));
  }
  return ends;
}
