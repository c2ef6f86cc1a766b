import { setTimeout as sleep } from 'node:timers/promises';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { FencedResource } from './fenced-resource.js';
import {
  RunClock,
  type FaultWindow,
  type HistoryOp,
  type LockOp,
  type LockOpKind,
  type LockOpOutcome,
  type PermitShape,
} from './history.js';
import type { ObserverStall } from './checker.js';

/** How often the stall recorder ticks, and the gap between two ticks that counts as a stall (see Driver.measured). */
const TICK_MS = 10;
const STALL_MS = 50;

export interface DriverOptions {
  readonly urls: readonly string[];
  readonly clients: number;
  readonly keys: readonly string[];
  readonly ttlMs: number;
  readonly durationMs: number;
  /** Longer than any pause a scenario injects, so a late answer is still recorded. */
  readonly httpTimeoutMs?: number;
  /**
   * Called after each grant, before the first write: a number > 0 makes that client stop for that
   * long (a GC pause, a stalled VM) while it believes it holds the lock.
   */
  readonly pauseAfterGrant?: (client: number) => number;
  /** Which instances a client may use for a new acquire; all by default. */
  readonly liveInstances?: () => readonly number[];
  /** Share of leases taken as a lock set of two keys (/v1/lock-sets/...) instead of one lock; 0 by default. */
  readonly setFraction?: number;
  /**
   * Drive semaphores (every permit under `limit`) or read/write locks (a write with probability
   * `writeShare`, else a read) instead of locks. Several holders at once are then normal, so nothing is
   * written to the fenced resource; the checker judges the holders' windows instead.
   */
  readonly primitive?: { readonly kind: 'semaphore'; readonly limit: number } | { readonly kind: 'rwlock'; readonly writeShare: number };
  /** Acquires wait up to this long in the FIFO queue (default 0: answered at once). */
  readonly waitMs?: number;
}

const PRIMITIVE_PATHS = { semaphore: 'semaphores', rwlock: 'rwlocks' } as const;

export interface PausedLease {
  readonly client: number;
  readonly grantId: number;
  readonly pausedMs: number;
  readonly writeAccepted: boolean;
  readonly renewStatus: number | null;
  readonly releaseStatus: number | null;
}

export interface DriverResult {
  readonly ops: HistoryOp[];
  readonly paused: PausedLease[];
  readonly resource: FencedResource;
}

/** Bounded loops: a client stops at the deadline or after this many leases, whichever comes first. */
const MAX_LEASES_PER_CLIENT = 100_000;

/**
 * Runs N clients against the instances. Each loops: acquire -> write to the fenced resource (in the same
 * tick as the answer) -> hold a little -> write again -> maybe renew and write again -> release, and records every
 * operation on one monotonic clock. A lease is renewed and released through the instance that granted it;
 * when that instance fails the client abandons the lease (it runs out by itself) and moves on.
 */
/** How often a paused client asks its renew or release again after a 503 or no answer. */
const PAUSED_CALL_ATTEMPTS = 10;

export class Driver {
  readonly clock = new RunClock();
  readonly resource = new FencedResource();
  readonly ops: HistoryOp[] = [];
  readonly faults: FaultWindow[] = [];
  private readonly paused: PausedLease[] = [];
  private nextId = 1;

  constructor(private readonly options: DriverOptions) {}

  /** The longest this process's event loop was stalled during the run, in ms (see CheckOptions.observerLagMs). */
  maxLagMs = 0;
  /** When this process's event loop did not run for longer than STALL_MS (see CheckOptions.observerStalls). */
  readonly stalls: ObserverStall[] = [];

  async run(): Promise<DriverResult> {
    const deadline = this.clock.nowMs() + this.options.durationMs;
    await this.measured(() => Promise.all(Array.from({ length: this.options.clients }, (_, c) => this.client(c, deadline))));
    return { ops: this.ops, paused: this.paused, resource: this.resource };
  }

  /**
   * Runs `work` with this process's event-loop delay measured into maxLagMs: for a scenario that makes
   * its calls itself (through call) rather than through run, whose answers are checked the same way.
   */
  async measured<T>(work: () => Promise<T>): Promise<T> {
    const lag = monitorEventLoopDelay({ resolution: 10 });
    lag.enable();
    // The stalls themselves, on the wall clock the answers are read on: a tick that comes more than
    // STALL_MS after the one before marks the time from when it was due until it came as one in which no
    // answer could be read.
    let lastTickMs = Date.now();
    const ticks = setInterval(() => {
      const nowMs = Date.now();
      if (nowMs - lastTickMs > STALL_MS) this.stalls.push({ fromWallMs: lastTickMs + TICK_MS, toWallMs: nowMs });
      lastTickMs = nowMs;
    }, TICK_MS);
    try {
      return await work();
    } finally {
      clearInterval(ticks);
      lag.disable();
      this.maxLagMs = Math.max(this.maxLagMs, lag.max / 1e6);
    }
  }

  /** Marks a fault window in the history (for the uncertain-success check and the report). */
  fault(kind: string, instance: number | null, startMs: number, endMs: number, replies: FaultWindow['replies']): void {
    this.faults.push({ kind, instance, startMs, endMs, replies });
  }

  private async client(c: number, deadlineMs: number): Promise<void> {
    const { keys, ttlMs } = this.options;
    for (let lease = 0; lease < MAX_LEASES_PER_CLIENT && this.clock.nowMs() < deadlineMs; lease++) {
      const key = keys[Math.floor(Math.random() * keys.length)] as string;
      const live = this.options.liveInstances?.() ?? this.options.urls.map((_, i) => i);
      const instance = live[Math.floor(Math.random() * live.length)] as number;
      const permit = this.permitShape();
      if (permit === undefined && Math.random() < (this.options.setFraction ?? 0)) {
        let other = keys[Math.floor(Math.random() * keys.length)] as string;
        if (other === key) other = keys[(keys.indexOf(key) + 1) % keys.length] as string;
        if (other !== key) {
          await this.setLease(c, [key, other], instance);
          continue;
        }
      }
      const acq = await this.call(
        'acquire',
        c,
        key,
        instance,
        0,
        ttlMs,
        { ttlMs, holder: `c${c}@i${instance}`, ...permitBody(permit), ...(this.options.waitMs ? { waitMs: this.options.waitMs } : {}) },
        permit,
      );
      if (acq.op.outcome === 'conflict') {
        await sleep(5 + Math.random() * 20);
        continue;
      }
      if (acq.op.outcome !== 'ok' || acq.ownerToken === undefined || acq.op.fencingToken === undefined) {
        await sleep(20 + Math.random() * 30);
        continue;
      }
      const grantId = acq.op.id;
      const token = acq.op.fencingToken;
      const pauseMs = this.options.pauseAfterGrant?.(c) ?? 0;
      if (pauseMs > 0) {
        await this.pausedLease(c, key, instance, grantId, token, acq.ownerToken, pauseMs);
        continue;
      }
      // A rejected write means a newer holder exists; the client still gives its lease back.
      this.write(c, key, grantId, token);
      await sleep(Math.random() * ttlMs * 0.2);
      // A critical section writes more than once; a holder whose lease was lost meanwhile gets fenced here.
      this.write(c, key, grantId, token);
      if (Math.random() < 0.5) {
        const renew = await this.call('renew', c, key, instance, grantId, ttlMs, { ownerToken: acq.ownerToken, ttlMs });
        if (renew.op.outcome === 'ok') {
          this.write(c, key, grantId, token);
          await sleep(Math.random() * ttlMs * 0.1);
        }
      }
      await this.call('release', c, key, instance, grantId, ttlMs, { ownerToken: acq.ownerToken });
    }
  }

  /**
   * One lease on a lock set: acquire both keys, write to each with its own token, maybe renew, release.
   * Recorded as one op per key (see LockOp.set), so each key's share is checked like any grant.
   */
  private async setLease(c: number, keys: readonly string[], instance: number): Promise<void> {
    const { ttlMs } = this.options;
    // A set waits (up to one TTL) for its keys: against 32 plain clients on a few keys it would rarely find both free at once.
    const acq = await this.callSet('acquire', c, keys, instance, [], ttlMs, { keys, ttlMs, waitMs: ttlMs, holder: `c${c}@i${instance}` });
    if (acq.ops[0]?.outcome !== 'ok' || acq.ownerToken === undefined) {
      await sleep(acq.ops[0]?.outcome === 'conflict' ? 5 + Math.random() * 20 : 20 + Math.random() * 30);
      return;
    }
    const grants = acq.ops.map((op) => op.id);
    const writeAll = () => acq.ops.forEach((op) => op.fencingToken !== undefined && this.write(c, op.key, op.id, op.fencingToken));
    writeAll();
    await sleep(Math.random() * ttlMs * 0.2);
    writeAll();
    if (Math.random() < 0.5) {
      const renew = await this.callSet('renew', c, keys, instance, grants, ttlMs, { ownerToken: acq.ownerToken, keys, ttlMs });
      if (renew.ops[0]?.outcome === 'ok') writeAll();
    }
    await this.callSet('release', c, keys, instance, grants, ttlMs, { ownerToken: acq.ownerToken, keys });
  }

  /** One lock-set call over HTTP, recorded as one op per key. */
  async callSet(
    kind: LockOpKind,
    c: number,
    keys: readonly string[],
    instance: number,
    grantIds: readonly number[],
    ttlMs: number,
    body: Record<string, unknown>,
  ): Promise<{ ops: LockOp[]; ownerToken?: string }> {
    const setId = this.nextId++;
    const answer = await this.post(`${this.options.urls[instance]}/v1/lock-sets/${kind}`, body);
    const { outcome, json, receivedWallMs } = answer;
    const tokens = new Map<string, number>();
    if (outcome === 'ok' && Array.isArray(json.locks)) {
      for (const l of json.locks as Array<{ key: string; fencingToken: number }>) tokens.set(l.key, l.fencingToken);
    }
    const expiresAtMs = typeof json.expiresAt === 'string' ? Date.parse(json.expiresAt) : undefined;
    const ops = keys.map((key, i): LockOp => {
      const id = this.nextId++;
      const token = kind !== 'release' ? tokens.get(key) : undefined;
      return {
        ...recorded(answer, { id, kind, client: c, key, instance, ttlMs }),
        grantId: kind === 'acquire' ? id : (grantIds[i] as number),
        set: { id: setId, keys },
        ...(token !== undefined ? { fencingToken: token } : {}),
        ...(token !== undefined && expiresAtMs !== undefined ? { expiresAtMs, receivedWallMs } : {}),
      };
    });
    this.ops.push(...ops);
    return { ops, ...(typeof json.ownerToken === 'string' ? { ownerToken: json.ownerToken } : {}) };
  }

  /** A client that stops right after its grant, then carries on as if it still held the lock. */
  private async pausedLease(
    c: number,
    key: string,
    instance: number,
    grantId: number,
    token: number,
    ownerToken: string,
    pauseMs: number,
  ): Promise<void> {
    await sleep(pauseMs);
    const writeAccepted = this.write(c, key, grantId, token);
    // As a client does, a 503 or no answer (a starved machine) is asked again, until a definite answer:
    // the question is what keyholder answers about the expired lease, not whether it answered in time.
    const definite = async (kind: 'renew' | 'release', body: Record<string, unknown>) => {
      for (let attempt = 1; ; attempt++) {
        const { op } = await this.call(kind, c, key, instance, grantId, this.options.ttlMs, body);
        if ((op.status !== 503 && op.status !== null) || attempt === PAUSED_CALL_ATTEMPTS) return op.status;
        await sleep(100);
      }
    };
    const renewStatus = await definite('renew', { ownerToken, ttlMs: this.options.ttlMs });
    const releaseStatus = await definite('release', { ownerToken });
    this.paused.push({ client: c, grantId, pausedMs: pauseMs, writeAccepted, renewStatus, releaseStatus });
  }

  /** What the next acquire asks for, when driving a permit primitive. */
  private permitShape(): PermitShape | undefined {
    const p = this.options.primitive;
    if (p === undefined) return undefined;
    return p.kind === 'semaphore'
      ? { kind: 'semaphore', limit: p.limit }
      : { kind: 'rwlock', mode: Math.random() < p.writeShare ? 'write' : 'read' };
  }

  private write(c: number, key: string, grantId: number, fencingToken: number): boolean {
    // Permits are held by several callers at once: a fenced resource would refuse all but the newest.
    if (this.options.primitive) return true;
    const accepted = this.resource.write(key, fencingToken, `c${c}`);
    this.ops.push({ type: 'write', id: this.nextId++, client: c, key, grantId, fencingToken, atMs: this.clock.nowMs(), accepted });
    return accepted;
  }

  /**
   * One lock call over HTTP, recorded in the history. Public so a scenario that drives its own sequence
   * (not the client loop) still gets a history the checker can measure.
   */
  async call(
    kind: LockOpKind,
    c: number,
    key: string,
    instance: number,
    grantId: number,
    ttlMs: number,
    body: Record<string, unknown>,
    permit?: PermitShape,
  ): Promise<{ op: LockOp; ownerToken?: string }> {
    const id = this.nextId++;
    const path = this.options.primitive ? PRIMITIVE_PATHS[this.options.primitive.kind] : 'locks';
    const answer = await this.post(`${this.options.urls[instance]}/v1/${path}/${encodeURIComponent(key)}/${kind}`, body);
    const { outcome, json, receivedWallMs } = answer;
    const ok = outcome === 'ok' && kind !== 'release';
    const op: LockOp = {
      ...recorded(answer, { id, kind, client: c, key, instance, ttlMs }),
      grantId: kind === 'acquire' ? id : grantId,
      ...(ok && typeof json.fencingToken === 'number' ? { fencingToken: json.fencingToken } : {}),
      ...(ok && typeof json.expiresAt === 'string' ? { expiresAtMs: Date.parse(json.expiresAt), receivedWallMs } : {}),
      ...(permit ? { permit } : {}),
    };
    this.ops.push(op);
    return { op, ...(typeof json.ownerToken === 'string' ? { ownerToken: json.ownerToken } : {}) };
  }

  /** One POST with its times on the run clock; a call without an answer has status null and outcome 'failed'. */
  private async post(url: string, body: Record<string, unknown>): Promise<Answer> {
    const startMs = this.clock.nowMs();
    let status: number | null = null;
    let json: Record<string, unknown> = {};
    let receivedWallMs = 0;
    try {
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(this.options.httpTimeoutMs ?? 10_000),
      });
      status = res.status;
      receivedWallMs = Date.now();
      json = (await res.json()) as Record<string, unknown>;
    } catch {
      // No answer: connection refused or reset, or our own timeout. The outcome is unknown.
    }
    const endMs = this.clock.nowMs();
    const outcome: LockOpOutcome =
      status === null ? 'failed' : status === 200 ? 'ok' : status === 409 ? 'conflict' : status === 503 ? 'unavailable' : 'other';
    return { startMs, endMs, status, outcome, json, receivedWallMs };
  }
}

/** What one POST of the driver got. */
interface Answer {
  readonly startMs: number;
  readonly endMs: number;
  readonly status: number | null;
  readonly outcome: LockOpOutcome;
  readonly json: Record<string, unknown>;
  /** Wall clock (Date.now()) when the answer arrived, 0 without one (see LockOp.receivedWallMs). */
  readonly receivedWallMs: number;
}

/** The fields of a recorded lock call that its answer and its caller give. */
function recorded(
  answer: Answer,
  call: Pick<LockOp, 'id' | 'kind' | 'client' | 'key' | 'instance' | 'ttlMs'>,
): Pick<LockOp, 'type' | 'id' | 'kind' | 'client' | 'key' | 'instance' | 'startMs' | 'endMs' | 'outcome' | 'status' | 'code' | 'ttlMs'> {
  const code = answer.status !== null && answer.status >= 400 && typeof answer.json.code === 'string' ? answer.json.code : undefined;
  return {
    type: 'lock',
    ...call,
    startMs: answer.startMs,
    endMs: answer.endMs,
    outcome: answer.outcome,
    status: answer.status,
    ...(code !== undefined ? { code } : {}),
  };
}

function permitBody(permit: PermitShape | undefined): Record<string, unknown> {
  if (permit === undefined) return {};
  return permit.kind === 'semaphore' ? { limit: permit.limit } : { mode: permit.mode };
}
