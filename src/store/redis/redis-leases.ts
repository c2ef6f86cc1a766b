import { performance } from 'node:perf_hooks';
// Node's own, not the global: a test's fake timers must not hold back a release's answer.
import { setImmediate as afterThisTurn } from 'node:timers/promises';
import { Cluster } from 'ioredis';
import type { RedisClient } from './client.js';
import {
  IdempotencyKeyReusedError,
  InvalidRequestError,
  OverloadedError,
  StoreUnavailableError,
  TooManyWaitersError,
} from '../../domain/errors.js';
import { LATE_REPLY_FRACTION } from '../../domain/freshness.js';
import type { EvictedLease, LeaseAcquire, LeaseAcquireOutcome, LeaseKind, LeaseRenewOutcome } from '../../domain/lease-store.js';
import type {
  IndexedLockState,
  ListPage,
  ListQuery,
  LockListRow,
  LockState,
  ReleaseRequest,
  ReleaseRequestInput,
} from '../../domain/lock-values.js';
import {
  MAX_HOLDERS_SHOWN,
  withReleaseRequest,
  type IndexedPermitState,
  type PermitKind,
  type PermitListPage,
  type PermitListQuery,
  type PermitState,
  type QueuedCaller,
} from '../../domain/permit-values.js';
import { randomBase64url } from '../../domain/random.js';
import { insideCap, type KeySpace, permitKindLetter } from './keys.js';
import { slotOf } from './slot.js';
import {
  parseAcquire,
  parseCancel,
  parseFlag,
  parseForceRelease,
  parseHeartbeat,
  parseInspect,
  parseLease,
  parseLockRelease,
  parseLockSetAcquire,
  parseLockSetRenew,
  parsePermitAcquire,
  parsePermitForceRelease,
  parsePermitHeartbeat,
  parsePermitInspect,
  parseQueue,
  parseRelease,
  parseRequestRelease,
  releaseRequestPayload,
  type AcquireReply,
  type CancelReply,
  type HandOverNotice,
  type LeaseReply,
  type PermitAcquireReply,
  UnexpectedReplyError,
} from './replies.js';
import type { HandOverArgs, ScriptArgs, ScriptName, Scripts } from './scripts.js';
import type { LeaseEngine } from '../shared/lease-port.js';
import { type HandedLease, WaitRoom, type Waiter } from '../shared/wait-room.js';
import type { ScriptLane } from './script-lane.js';
import { ContendedKeys } from './contended-keys.js';

/** What the engine borrows from the Redis store it lives in: its connection, scripts and guards. */
export interface RedisLeasesDeps {
  readonly redis: RedisClient;
  readonly scripts: Scripts;
  readonly keys: KeySpace;
  /** This process's identity for hand-over messages (the store subscribes to its channel). */
  readonly instanceId: string;
  readonly graceMs: number;
  readonly maxWaitersPerKey: number;
  /** Replica acknowledgement is on: a handed lease is then confirmed by a renewal (see confirmLock). */
  readonly replicaAcks: boolean;
  /** Runs one Redis call; every failure becomes StoreUnavailableError (RedisStore.call). */
  call<T>(run: () => Promise<T>): Promise<T>;
  /**
   * RedisStore.call's two steps, for a call that writes them out itself (a lock pair's acquire and
   * release: one async frame instead of call's and its closure's): the check before sending (throws
   * StoreUnavailableError), and what a failure becomes.
   */
  ensureConnected(): void;
  callFailed(err: unknown): StoreUnavailableError;
  /** The store's lane for acquire and cancel scripts (ScriptLane): every kind of key shares it. */
  readonly acquires: ScriptLane;
  /** One listing page of ids over every data node (RedisStore.scanIds: one Redis, or each Cluster master). */
  scanIds(
    pattern: string,
    limit: number,
    cursor: string | undefined,
    idOf: (redisKey: string) => string | null,
  ): Promise<{ ids: string[]; nextCursor: string | null }>;
  /** Waits for replica acknowledgement when configured; a grant not confirmed is given back by `giveBack`. */
  replicated(
    id: string,
    what: 'grant' | 'keyed grant' | 'replay' | 'renewal',
    servedBy: string | null,
    giveBack: () => Promise<unknown>,
  ): Promise<void>;
  /** The node that serves `id`'s slot now, read before a script (RedisStore.servedBy; null without acks). */
  servedBy(id: string): string | null;
  /**
   * Subscribes to a change channel (RedisStore.watchChannel: one SUBSCRIBE however many listeners).
   * `markKey`: the lock whose scripts publish only while it is marked as watched (watch-marks.ts).
   */
  watchChannel(channel: string, onChange: () => void, markKey?: string): Promise<() => void>;
}

/**
 * 3 s: an instance tells Redis its waiters are still there every heartbeat (HEARTBEAT_INTERVAL_MS). A
 * waiter whose instance died stops being refreshed and is skipped after this, so it never receives a
 * grant nobody will use for longer than that.
 */
const WAITER_LIVENESS_MS = 3000;

const newId = () => randomBase64url(9);

/**
 * A waiter handed the lock within this share of its TTL of being registered is answered from the
 * hand-over message (see confirmLock): half the share the freshness guard allows (LATE_REPLY_FRACTION),
 * so an answer taken this way is not then refused as late on its way out.
 */
const HANDED_LEASE_FRACTION = LATE_REPLY_FRACTION / 2;

/** A renewal Redis confirmed, in the engine's words (one key: one fencing token). */
function renewedOne(reply: Extract<LeaseReply, { held: true }>): LeaseRenewOutcome {
  const renewed = { renewed: true as const, fencingTokens: [reply.fencingToken], expiresAtMs: reply.expiresAtMs };
  return withReleaseRequest(reply.quotaOutside === true ? { ...renewed, quotaOutside: true as const } : renewed, reply.releaseRequested);
}

/**
 * The Redis store's one lease engine: one `acquire` for every kind of key, and the calls on held keys
 * keyed by kind. Every operation is one Lua script, so check-and-set is atomic in Redis.
 *
 * Two families of scripts serve it:
 * - a lock (capacity 1, weight 1), one key or several (a lock set), goes to the lock scripts
 *   (acquire.lua, lock-set-*.lua, release.lua, ...): the documented capacity-1 fast path. The lock is
 *   the hot path (`npm run bench`): its scripts keep one small hash per key and carry the namespace
 *   quota, lock-delay and idempotency inside the same step;
 * - a semaphore or read/write lock (capacity N, a weight) goes to the permit scripts (permit-*.lua,
 *   the shared rules in _permits.lua), keys tagged by namespace as a lock's are (KeySpace.permitKeys).
 *
 * Waiting is the same for both: a caller that waits is queued in Redis (FIFO across all instances). A
 * release or a lease running out hands the key to the first live waiter inside the same script and
 * announces it on that waiter's instance channel: one message, to one instance, per hand-over; a
 * heartbeat finds missed messages and dead instances. One wait room per family.
 */
export class RedisLeases implements LeaseEngine {
  private readonly room: WaitRoom<LeaseAcquireOutcome>;
  /** The permits' waiters (the room is keyed by `kind key`). */
  private readonly permitRoom: WaitRoom<LeaseAcquireOutcome>;
  /** Keys an acquire here found held lately: their releases leave at once (see ContendedKeys). */
  private readonly contended = new ContendedKeys();

  constructor(private readonly deps: RedisLeasesDeps) {
    // The caller's key is filled in by the acquire that waited (only a one-key acquire waits).
    const notGranted = (retryAfterMs: number): LeaseAcquireOutcome => ({ acquired: false, reason: 'full', retryAfterMs, busyId: '' });
    this.room = new WaitRoom<LeaseAcquireOutcome>({
      confirm: (waiter, handed) => this.confirmLock(waiter, handed),
      notGranted,
      cancel: (waiter) => this.cancelLock(waiter),
      release: (id, ownerToken) => this.releaseLock(id, ownerToken),
      visit: (id, waiters) => this.visitLock(id, waiters),
    });
    this.permitRoom = new WaitRoom<LeaseAcquireOutcome>({
      confirm: (waiter) => this.confirmPermit(waiter),
      notGranted,
      cancel: (waiter) => this.cancelPermit(waiter),
      release: (roomKeyText, ownerToken) => {
        const { kind, id } = splitRoomKey(roomKeyText);
        return this.releasePermitLease(kind, id, ownerToken);
      },
      visit: (roomKeyText, waiters) => this.visitPermit(roomKeyText, waiters),
    });
  }

  /** A hand-over notice, by message or in a release's reply (see releaseLock). */
  handedOver(notice: HandOverNotice): void {
    // Waiter ids are unique across both rooms: the one that does not know it ignores it.
    this.room.granted(notice.waiterId, notice);
    this.permitRoom.granted(notice.waiterId);
  }

  visitAll(): void {
    this.room.visitAll();
    this.permitRoom.visitAll();
  }

  async closeAll(reason: unknown): Promise<void> {
    await this.room.closeAll(reason);
    await this.permitRoom.closeAll(reason);
  }

  /**
   * The one acquire: a lock's one key or several (the capacity-1 fast path, the lock scripts), or one
   * key of a semaphore or read/write lock (the permit scripts).
   */
  acquire(request: LeaseAcquire): Promise<LeaseAcquireOutcome> {
    if (request.kind !== 'lock') return this.takePermit(request);
    return request.ids.length > 1 ? this.takeLockSet(request) : this.takeLock(request);
  }

  renew(kind: LeaseKind, ids: readonly string[], ownerToken: string, ttlMs: number): Promise<LeaseRenewOutcome> {
    if (kind !== 'lock') return this.renewPermitLease(kind, ids[0] as string, ownerToken, ttlMs);
    return ids.length > 1 ? this.renewLockSet(ids, ownerToken, ttlMs) : this.renewLock(ids[0] as string, ownerToken, ttlMs);
  }

  release(kind: LeaseKind, ids: readonly string[], ownerToken: string): Promise<boolean> {
    if (kind !== 'lock') return this.releasePermitLease(kind, ids[0] as string, ownerToken);
    return ids.length > 1 ? this.releaseLockSet(ids, ownerToken) : this.releaseLock(ids[0] as string, ownerToken);
  }

  forceRelease(kind: LeaseKind, id: string, fencingToken?: number): Promise<EvictedLease[]> {
    return kind === 'lock' ? this.forceReleaseLock(id, fencingToken) : this.forceReleasePermitLeases(kind, id, fencingToken);
  }

  requestRelease(kind: LeaseKind, id: string, fencingToken: number, request: ReleaseRequestInput): Promise<ReleaseRequest | null> {
    return kind === 'lock'
      ? this.requestLockRelease(id, fencingToken, request)
      : this.requestPermitLeaseRelease(kind, id, fencingToken, request);
  }

  queue(kind: LeaseKind, id: string, limit: number): Promise<QueuedCaller[]> {
    return kind === 'lock' ? this.lockQueue(id, limit) : this.permitLeaseQueue(kind, id, limit);
  }

  /**
   * Subscribes to the key's change channel on the store's subscriber connection (one SUBSCRIBE per key,
   * however many local listeners). A lock's scripts publish only while it is marked as watched
   * (watch-marks.ts); the permit scripts announce a key's changes on the channel named by its pool hash
   * (permitChanged, _permits.lua).
   */
  watchChanges(kind: LeaseKind, id: string, onChange: () => void): Promise<() => void> {
    if (kind === 'lock') return this.deps.watchChannel(this.deps.keys.changeChannel(id), onChange, id);
    return this.deps.watchChannel(this.deps.keys.changeChannel(this.deps.keys.permitKeys(kind, id).pool), onChange);
  }

  // ---- Locks: the capacity-1 fast path (the lock scripts), one key or a lock set's several.

  private async takeLock(request: LeaseAcquire): Promise<LeaseAcquireOutcome> {
    const id = request.ids[0] as string;
    const waitMs = request.waitMs ?? 0;
    // The lease is decided from the moment the script is sent (after its turn in the lane), and the
    // node serving the key is read then too.
    let decidedAt = 0;
    let servedBy: string | null = null;
    const send = (waitFor: number, waiterId: string) =>
      this.deps.acquires.run(() => {
        decidedAt = performance.now();
        servedBy = this.deps.servedBy(id);
        return this.runAcquire(id, request, waitFor, waiterId);
      }, true);
    if (waitMs <= 0) {
      request.signal?.throwIfAborted();
      const reply = await send(0, '-');
      return this.settleLock(reply, decidedAt, id, request.ownerToken, servedBy, request.idempotencyKey !== undefined);
    }
    // Registered before the script runs: a hand-over message may arrive before the script's reply.
    const waiter = this.room.register({ id: newId(), key: id, ownerToken: request.ownerToken, ttlMs: request.ttlMs });
    const reply = await waiter.enter(request.signal, () => send(waitMs, waiter.id));
    if (reply.kind === 'queued') {
      const outcome = await waiter.wait(waitMs, reply.retryAfterMs, request.signal);
      if (!outcome.acquired) return outcome.reason === 'full' ? { ...outcome, busyId: id } : outcome;
      if ((request.lockDelayMs ?? 0) > 0) await this.setLockDelay(id, request.ownerToken, request.lockDelayMs ?? 0);
      return { ...outcome, queued: true };
    }
    waiter.drop();
    return this.settleLock(reply, decidedAt, id, request.ownerToken, servedBy, request.idempotencyKey !== undefined);
  }

  /**
   * A waiter's record does not carry its lock-delay: the lease handed to it gets it here, right after
   * the hand-over was answered (with at least three quarters of its TTL left, or confirmed by a renew that
   * restarted it: the lease does not expire in between).
   * Failing, the lease is given back: a lease without the delay it was asked with is not handed out.
   */
  private async setLockDelay(id: string, ownerToken: string, lockDelayMs: number): Promise<void> {
    try {
      const set = await this.deps.call(async () =>
        parseFlag('lockDelay', await this.deps.scripts.run('lockDelay', { lockKey: this.deps.keys.lock(id), ownerToken, lockDelayMs })),
      );
      if (!set) throw new StoreUnavailableError('the lock was handed over, but its lease ended before its lock-delay was set');
    } catch (err) {
      await this.releaseLock(id, ownerToken).catch(() => false);
      throw err;
    }
  }

  private async runAcquire(
    id: string,
    { ownerToken, ttlMs, holder, idempotencyKey, lockDelayMs, maxHeldInNamespace, quotaOutside }: LeaseAcquire,
    waitMs: number,
    waiterId: string,
  ): Promise<AcquireReply> {
    // As this.deps.call(() => ...) would, written out (see RedisLeasesDeps.ensureConnected).
    this.deps.ensureConnected();
    try {
      // Every property written out: spreading another object into this literal (`...handOverArgs`)
      // sent V8 down a slow path that cost about 40 µs of CPU per acquire + release pair.
      const raw = await this.deps.scripts.run('acquire', {
        graceMs: this.deps.graceMs,
        channelPrefix: this.deps.keys.grantChannelPrefix(),
        lockName: id,
        keys: this.deps.keys.lockKeys(id),
        ownerToken,
        ttlMs,
        holder: holder ?? '',
        waitMs,
        waiterId,
        instanceId: this.deps.instanceId,
        maxWaiters: this.deps.maxWaitersPerKey,
        livenessMs: WAITER_LIVENESS_MS,
        idempotencyKey: idempotencyKey ?? '',
        lockDelayMs: lockDelayMs ?? 0,
        // -1: counted around the script (acquire.lua, ARGV[9]); the lease records that it took no unit.
        maxQuotaSlots: quotaOutside === true ? -1 : insideCap(maxHeldInNamespace ?? 0),
      });
      const reply = parseAcquire(raw);
      // acquire.lua queues only a caller that waits.
      if (reply.kind === 'queued' && waitMs <= 0) throw new UnexpectedReplyError('acquire', raw);
      if (reply.kind === 'held' || reply.kind === 'queued' || reply.kind === 'queue_full') this.contended.mark(id, reply.retryAfterMs);
      return reply;
    } catch (err) {
      throw this.deps.callFailed(err);
    }
  }

  /** The answer to a lock's acquire the script settled at once (not queued). */
  private async settleLock(
    reply: AcquireReply,
    decidedAt: number,
    id: string,
    ownerToken: string,
    servedBy: string | null,
    keyed: boolean,
  ): Promise<LeaseAcquireOutcome> {
    switch (reply.kind) {
      case 'granted':
        await this.deps.replicated(id, keyed ? 'keyed grant' : 'grant', servedBy, () =>
          this.releaseLock(id, ownerToken).catch(() => false),
        );
        return { acquired: true, decidedAt, fencingTokens: [reply.fencingToken], expiresAtMs: reply.expiresAtMs };
      case 'replayed': {
        // Confirmed as a grant is (the replay wrote its record again, so WAIT covers the grant behind it),
        // and never given back: it is the lease of the key (counted under the call that made it).
        await this.deps.replicated(id, 'replay', servedBy, async () => false);
        const { fencingToken, expiresAtMs, ownerToken, holder } = reply;
        return { acquired: true, decidedAt, fencingTokens: [fencingToken], expiresAtMs, replayed: { ownerToken, holder } };
      }
      case 'queue_full':
        throw new TooManyWaitersError('key', reply.retryAfterMs);
      case 'idempotency_key_reused':
        throw new IdempotencyKeyReusedError();
      case 'quota_full':
        return { acquired: false, reason: 'full', retryAfterMs: reply.retryAfterMs, busyId: id, quotaFull: true };
      default:
        return { acquired: false, reason: 'full', retryAfterMs: reply.retryAfterMs, busyId: id };
    }
  }

  private async renewLock(id: string, ownerToken: string, ttlMs: number): Promise<LeaseRenewOutcome> {
    const servedBy = this.deps.servedBy(id);
    const reply = await this.renewLockLease(id, ownerToken, ttlMs);
    if (!reply.held) return { renewed: false };
    // A renewal not confirmed is not given back (see RedisStore.replicated).
    await this.deps.replicated(id, 'renewal', servedBy, async () => false);
    return renewedOne(reply);
  }

  private renewLockLease(id: string, ownerToken: string, ttlMs: number): Promise<LeaseReply> {
    return this.deps.call(async () =>
      parseLease(
        'renew',
        await this.deps.scripts.run('renew', {
          lockKey: this.deps.keys.lock(id),
          quota: this.deps.keys.lockKeys(id).quota,
          ownerToken,
          ttlMs,
          graceMs: this.deps.graceMs,
        }),
      ),
    );
  }

  /** One script on the lock record (field r): the lease with `fencingToken`, if live, keeps the request. */
  private requestLockRelease(id: string, fencingToken: number, request: ReleaseRequestInput): Promise<ReleaseRequest | null> {
    return this.deps.call(async () =>
      parseRequestRelease(
        'request-release',
        await this.deps.scripts.run('requestRelease', {
          lockKey: this.deps.keys.lock(id),
          fencingToken,
          payload: releaseRequestPayload(request),
          channelPrefix: this.deps.keys.grantChannelPrefix(),
          lockName: id,
        }),
        request,
      ),
    );
  }

  /**
   * Frees the lease and hands the lock to the first live waiter. A waiter of this instance is named in
   * the reply instead of being sent a hand-over message, and is woken here, before the release itself
   * is answered: on a hot key the next holder's grant leaves first, without a second socket read (the
   * subscriber's) or a PUBLISH. Should the reply be lost, the waiter's heartbeat visit finds the grant.
   */
  private async releaseLock(id: string, ownerToken: string): Promise<boolean> {
    // As this.deps.call(() => ...) would, written out (see RedisLeasesDeps.ensureConnected).
    this.deps.ensureConnected();
    try {
      // Written out, not spread from handOverArgs: see runAcquire.
      const { released, handedTo } = parseLockRelease(
        await this.deps.scripts.run(
          'release',
          {
            graceMs: this.deps.graceMs,
            channelPrefix: this.deps.keys.grantChannelPrefix(),
            lockName: id,
            keys: this.deps.keys.lockKeys(id),
            ownerToken,
            instanceId: this.deps.instanceId,
          },
          // One that may hand the lock over leaves at once; the others with the turn's other calls.
          this.contended.has(id),
        ),
      );
      if (handedTo !== undefined) {
        this.handedOver(handedTo);
        // The next holder's answer leaves first: it is written by this turn's microtasks, and the release
        // is answered after them. On a hot key the next hand-off waits for that holder, not for this caller.
        await afterThisTurn();
      }
      return released;
    } catch (err) {
      throw this.deps.callFailed(err);
    }
  }

  /** A lock's live lease, as the port's inspect answers it. */
  async lockState(id: string): Promise<LockState | null> {
    const reply = await this.deps.call(async () =>
      parseInspect(await this.deps.scripts.run('inspect', { keys: this.deps.keys.lockKeys(id) })),
    );
    if (!reply.held) return null;
    const { fencingToken, holder, expiresAtMs, ttlRemainingMs, waiters, releaseRequested } = reply;
    return withReleaseRequest({ holder, fencingToken, expiresAtMs, ttlRemainingMs, waiters }, releaseRequested);
  }

  /** A lock's state with what its watch index needs, as the port's inspectIndexed answers it. */
  async lockIndexed(id: string): Promise<IndexedLockState> {
    const reply = await this.deps.call(async () =>
      parseInspect(await this.deps.scripts.run('inspect', { keys: this.deps.keys.lockKeys(id) })),
    );
    if (!reply.held) {
      return {
        state: null,
        lastFencingToken: reply.lastFencingToken,
        // On the Redis clock; told as an end time on this clock (the same machine's, or close).
        ...(reply.lockDelayLeftMs > 0 ? { lockDelayUntilMs: Date.now() + reply.lockDelayLeftMs } : {}),
      };
    }
    const { fencingToken, holder, expiresAtMs, ttlRemainingMs, waiters, releaseRequested } = reply;
    const state = withReleaseRequest({ holder, fencingToken, expiresAtMs, ttlRemainingMs, waiters }, releaseRequested);
    return { state, lastFencingToken: fencingToken };
  }

  /** Every key of the set or none, in one script (lock-set-acquire.lua); a lock set never waits. */
  private async takeLockSet({ ids, ownerToken, ttlMs, holder, lockDelayMs }: LeaseAcquire): Promise<LeaseAcquireOutcome> {
    this.checkOneSlot(ids);
    let decidedAt = 0;
    let servedBy: string | null = null;
    const reply = await this.deps.acquires.run(() => {
      decidedAt = performance.now();
      // On a Cluster a set's keys share one slot (checkOneSlot): its first key names the master that serves them all.
      servedBy = this.deps.servedBy(ids[0] as string);
      return this.deps.call(async () =>
        parseLockSetAcquire(
          await this.deps.scripts.run('lockSetAcquire', {
            members: ids.map((id) => ({ keys: this.deps.keys.lockKeys(id), name: id })),
            ownerToken,
            ttlMs,
            holder: holder ?? '',
            graceMs: this.deps.graceMs,
            lockDelayMs: lockDelayMs ?? 0,
            channelPrefix: this.deps.keys.grantChannelPrefix(),
          }),
          ids.length,
        ),
      );
    }, true);
    if (!reply.granted) {
      return { acquired: false, reason: 'full', retryAfterMs: reply.retryAfterMs, busyId: ids[reply.busyIndex] as string };
    }
    if (this.deps.replicaAcks) {
      // Replica acknowledgement covers the set as one grant: not confirmed in time, the whole set goes back.
      const first = ids[0] as string;
      try {
        await this.deps.replicated(first, 'grant', servedBy, () => this.releaseLock(first, ownerToken).catch(() => false));
      } catch (err) {
        await this.releaseLockSet(ids, ownerToken).catch(() => false);
        throw err;
      }
    }
    return { acquired: true, fencingTokens: reply.fencingTokens, expiresAtMs: reply.expiresAtMs, decidedAt };
  }

  /**
   * A lock set is one script over all its keys, and a Cluster runs a script only when every key it names
   * lives in one hash slot. A namespace's locks are spread over its shards (keys.ts), so on a Cluster a
   * set whose keys fall in different shards is refused here, as a bad request the caller can act on
   * (docs/limits.md), instead of failing in Redis with CROSSSLOT. A single Redis (or Sentinel) has no slots:
   * every set works there.
   */
  private checkOneSlot(ids: readonly string[]): void {
    if (!(this.deps.redis instanceof Cluster) || ids.length < 2) return;
    const slot = slotOf(this.deps.keys.lock(ids[0] as string));
    if (ids.some((id) => slotOf(this.deps.keys.lock(id)) !== slot)) {
      throw new InvalidRequestError(
        'keys',
        'on a Redis Cluster a lock set must have all its keys in one shard of the namespace, and these are not; lock them one by one, or use a single Redis (see docs/limits.md)',
      );
    }
  }

  private async renewLockSet(ids: readonly string[], ownerToken: string, ttlMs: number): Promise<LeaseRenewOutcome> {
    const servedBy = this.deps.servedBy(ids[0] as string);
    const reply = await this.deps.call(async () =>
      parseLockSetRenew(
        await this.deps.scripts.run('lockSetRenew', {
          lockKeys: ids.map((id) => this.deps.keys.lock(id)),
          ownerToken,
          ttlMs,
          graceMs: this.deps.graceMs,
        }),
        ids.length,
      ),
    );
    if (reply.renewed) await this.deps.replicated(ids[0] as string, 'renewal', servedBy, async () => false);
    return reply;
  }

  private releaseLockSet(ids: readonly string[], ownerToken: string): Promise<boolean> {
    return this.deps.call(async () =>
      parseFlag(
        'lockSetRelease',
        await this.deps.scripts.run('lockSetRelease', {
          members: ids.map((id) => ({ keys: this.deps.keys.lockKeys(id), name: id })),
          ownerToken,
          graceMs: this.deps.graceMs,
          channelPrefix: this.deps.keys.grantChannelPrefix(),
        }),
      ),
    );
  }

  private async lockQueue(id: string, limit: number): Promise<QueuedCaller[]> {
    const queued = await this.deps.call(async () =>
      parseQueue(await this.deps.scripts.run('queue', { keys: this.deps.keys.lockKeys(id), limit, layout: 'lock' })),
    );
    return queued.map(({ holder, waitingSinceMs }, i) => ({ position: i + 1, holder, waitingSinceMs }));
  }

  private async forceReleaseLock(id: string, fencingToken?: number): Promise<EvictedLease[]> {
    const reply = await this.deps.call(async () =>
      parseForceRelease(
        await this.deps.scripts.run('forceRelease', { ...this.handOverArgs(id), keys: this.deps.keys.lockKeys(id), fencingToken }),
      ),
    );
    if (!reply.released) return [];
    const { holder, fencingToken: token, ownerToken, expiresAtMs, quotaOutside } = reply;
    return [
      quotaOutside === true
        ? { holder, fencingToken: token, ownerToken, expiresAtMs, quotaOutside }
        : { holder, fencingToken: token, ownerToken, expiresAtMs },
    ];
  }

  /**
   * SCAN with MATCH and COUNT (never KEYS), through the store's scanIds: each call walks a bounded part of
   * the keyspace, so a listing never blocks Redis however many keys it holds. The keys found are read
   * with the inspect script (on the Redis clock, without the owner token); lock hashes that only
   * remember a fencing token are skipped. A page may hold a few more or fewer than `limit` locks; only a
   * null cursor means the end.
   */
  async listLocks({ prefix, limit, cursor }: ListQuery): Promise<ListPage> {
    const page = await this.deps.scanIds(this.deps.keys.lockPattern(prefix), limit, cursor, (redisKey) =>
      this.deps.keys.lockIdOf(redisKey),
    );
    const states = await Promise.all(page.ids.map(async (id) => ({ id, state: await this.lockState(id) })));
    const leases: LockListRow[] = [];
    for (const { id, state } of states) if (state !== null) leases.push({ id, ...state });
    return { leases, nextCursor: page.nextCursor };
  }

  /**
   * A waiter was handed the lock. When the hand-over message named the lease and came soon enough, the
   * caller is answered from it: the fencing token and end Redis gave the lease, decided (for the
   * freshness checks) when the waiter was registered, before its acquire was sent and so before the
   * hand-over. A hand-over then costs the release script and its message, and no renewal.
   *
   * Otherwise (no message: a heartbeat or a cancel found the grant; a wait long next to the lease; replica
   * acknowledgement on, whose WAIT must follow a write on this connection) a renewal confirms the lease
   * is still this waiter's and restarts its full TTL from now, so the caller gets the lease it asked for
   * however long the message took.
   */
  private async confirmLock(waiter: Waiter, handed?: HandedLease): Promise<LeaseAcquireOutcome> {
    if (handed !== undefined && !this.deps.replicaAcks && performance.now() - handed.registeredAt < waiter.ttlMs * HANDED_LEASE_FRACTION) {
      return { acquired: true, fencingTokens: [handed.fencingToken], expiresAtMs: handed.expiresAtMs, decidedAt: handed.registeredAt };
    }
    const decidedAt = performance.now();
    const servedBy = this.deps.servedBy(waiter.key);
    const reply = await this.renewLockLease(waiter.key, waiter.ownerToken, waiter.ttlMs);
    // Redis handed the lock over and answered this renewal, but the lease had run out in between: this
    // process took longer than the whole lease to act on the hand-over. That is this instance's load,
    // not the store's: the caller is told so (and nobody holds the lease; it went to the next waiter).
    if (!reply.held) {
      throw new OverloadedError(
        'event_loop_delay',
        1000,
        'the lock was handed to this caller, but this instance took longer than the lease to deliver it; it went to the next caller',
      );
    }
    await this.deps.replicated(waiter.key, 'grant', servedBy, () => this.releaseLock(waiter.key, waiter.ownerToken).catch(() => false));
    return { acquired: true, fencingTokens: [reply.fencingToken], expiresAtMs: reply.expiresAtMs, decidedAt };
  }

  /** In the acquire lane (never refused): a burst's waits end together, and so do their cancels. */
  private cancelLock(waiter: Waiter): Promise<CancelReply> {
    return this.deps.acquires.run(
      () =>
        this.deps.call(async () =>
          parseCancel(
            await this.deps.scripts.run('cancel', {
              keys: this.deps.keys.lockKeys(waiter.key),
              waiterId: waiter.id,
              ownerToken: waiter.ownerToken,
            }),
          ),
        ),
      false,
    );
  }

  private async visitLock(id: string, waiters: readonly Waiter[]) {
    const { remainingLeaseMs, grantedWaiterId, lostWaiterIds } = await this.deps.call(async () =>
      parseHeartbeat(
        await this.deps.scripts.run('heartbeat', {
          ...this.handOverArgs(id),
          keys: this.deps.keys.lockKeys(id),
          livenessMs: WAITER_LIVENESS_MS,
          waiters,
        }),
      ),
    );
    return { remainingLeaseMs, grantedWaiterIds: grantedWaiterId === null ? [] : [grantedWaiterId], lostWaiterIds };
  }

  // ---- Semaphores and read/write locks: a key of capacity N, leases with a weight (the permit scripts).

  private async takePermit(request: LeaseAcquire): Promise<LeaseAcquireOutcome> {
    const kind = request.kind as PermitKind;
    const id = request.ids[0] as string;
    const waitMs = request.waitMs ?? 0;
    // Decided when the script is sent, after its turn in the lane (as for locks, takeLock).
    let decidedAt = 0;
    let servedBy: string | null = null;
    const send = (waitFor: number, waiterId: string) =>
      this.deps.acquires.run(() => {
        decidedAt = performance.now();
        servedBy = this.deps.servedBy(id);
        return this.runPermitAcquire(kind, id, request, waitFor, waiterId);
      }, true);
    if (waitMs <= 0) {
      request.signal?.throwIfAborted();
      const reply = await send(0, '-');
      return this.settlePermit(reply, decidedAt, kind, id, request.ownerToken, servedBy);
    }
    const waiter = this.permitRoom.register({ id: newId(), key: roomKey(kind, id), ownerToken: request.ownerToken, ttlMs: request.ttlMs });
    const reply = await waiter.enter(request.signal, () => send(waitMs, waiter.id));
    if (reply.kind === 'queued') {
      const outcome = await waiter.wait(waitMs, reply.retryAfterMs, request.signal);
      if (outcome.acquired) return { ...outcome, queued: true };
      return outcome.reason !== 'full' ? outcome : { ...outcome, busyId: id };
    }
    waiter.drop();
    return this.settlePermit(reply, decidedAt, kind, id, request.ownerToken, servedBy);
  }

  private runPermitAcquire(
    kind: PermitKind,
    id: string,
    request: LeaseAcquire,
    waitMs: number,
    waiterId: string,
  ): Promise<PermitAcquireReply> {
    return this.deps.call(async () => {
      // The acquire and release of every permit write the hand-over arguments out instead of spreading
      // handOverArgs into the literal: V8 builds a literal with a spread on a much slower path.
      const raw = await this.deps.scripts.run('permitAcquire', {
        graceMs: this.deps.graceMs,
        channelPrefix: this.deps.keys.grantChannelPrefix(),
        lockName: id,
        keys: this.deps.keys.permitKeys(kind, id),
        ownerToken: request.ownerToken,
        ttlMs: request.ttlMs,
        holder: request.holder ?? '',
        weight: request.weight,
        capacity: request.capacity,
        waitMs,
        waiterId,
        instanceId: this.deps.instanceId,
        maxWaiters: this.deps.maxWaitersPerKey,
        livenessMs: WAITER_LIVENESS_MS,
      });
      return parsePermitAcquire(raw);
    });
  }

  private async settlePermit(
    reply: PermitAcquireReply,
    decidedAt: number,
    kind: PermitKind,
    id: string,
    ownerToken: string,
    servedBy: string | null,
  ): Promise<LeaseAcquireOutcome> {
    switch (reply.kind) {
      case 'granted':
        await this.deps.replicated(id, 'grant', servedBy, () => this.releasePermitLease(kind, id, ownerToken).catch(() => false));
        return { acquired: true, decidedAt, fencingTokens: [reply.fencingToken], expiresAtMs: reply.expiresAtMs };
      case 'mismatch':
        return { acquired: false, reason: 'mismatch', capacity: reply.capacity, retryAfterMs: reply.retryAfterMs };
      case 'queue_full':
        throw new TooManyWaitersError('key', reply.retryAfterMs);
      default:
        return { acquired: false, reason: 'full', retryAfterMs: reply.retryAfterMs, busyId: id };
    }
  }

  private async renewPermitLease(kind: PermitKind, id: string, ownerToken: string, ttlMs: number): Promise<LeaseRenewOutcome> {
    const servedBy = this.deps.servedBy(id);
    const reply = await this.permitRenewStep(kind, id, ownerToken, ttlMs);
    if (!reply.held) return { renewed: false };
    // A renewal not confirmed is not given back (see RedisStore.replicated).
    await this.deps.replicated(id, 'renewal', servedBy, async () => false);
    return renewedOne(reply);
  }

  private requestPermitLeaseRelease(
    kind: PermitKind,
    id: string,
    fencingToken: number,
    request: ReleaseRequestInput,
  ): Promise<ReleaseRequest | null> {
    const args = {
      keys: this.deps.keys.permitKeys(kind, id),
      fencingToken,
      payload: releaseRequestPayload(request),
      channelPrefix: this.deps.keys.grantChannelPrefix(),
    };
    return this.script('permitRequestRelease', args, (raw) => parseRequestRelease('permit-request-release', raw, request));
  }

  private permitRenewStep(kind: PermitKind, id: string, ownerToken: string, ttlMs: number) {
    const args = { keys: this.deps.keys.permitKeys(kind, id), ownerToken, ttlMs, graceMs: this.deps.graceMs };
    return this.script('permitRenew', args, (raw) => parseLease('permit-renew', raw));
  }

  private releasePermitLease(kind: PermitKind, id: string, ownerToken: string): Promise<boolean> {
    const args = {
      graceMs: this.deps.graceMs,
      channelPrefix: this.deps.keys.grantChannelPrefix(),
      lockName: id,
      keys: this.deps.keys.permitKeys(kind, id),
      ownerToken,
    };
    return this.script('permitRelease', args, parseRelease);
  }

  async inspectPermits(kind: PermitKind, id: string): Promise<PermitState | null> {
    return (await this.inspectPermitsIndexed(kind, id)).state;
  }

  async inspectPermitsIndexed(kind: PermitKind, id: string): Promise<IndexedPermitState> {
    const reply = await this.script(
      'permitInspect',
      { keys: this.deps.keys.permitKeys(kind, id), shown: MAX_HOLDERS_SHOWN },
      parsePermitInspect,
    );
    const held = reply.held;
    if (held === null) return { state: null, index: reply.index };
    // Time left on the Redis clock the script read, as for locks (never this process's clock).
    const state = {
      capacity: held.capacity,
      waiters: held.waiters,
      holderCount: held.count,
      holders: held.leases
        .map((l) => ({ ...l, ttlRemainingMs: Math.max(0, l.expiresAtMs - held.nowMs) }))
        .sort((a, b) => a.fencingToken - b.fencingToken),
    };
    return { state, index: reply.index };
  }

  private async permitLeaseQueue(kind: PermitKind, id: string, limit: number): Promise<QueuedCaller[]> {
    const keys = this.deps.keys.permitKeys(kind, id);
    const args = { keys: { lock: keys.pool, queue: keys.queue, waiters: keys.waiters }, limit, layout: 'permit' } as const;
    const queued = await this.script('queue', args, parseQueue);
    return queued.map((q, i) => ({ position: i + 1, ...q }));
  }

  private forceReleasePermitLeases(kind: PermitKind, id: string, fencingToken?: number): Promise<EvictedLease[]> {
    const args = { ...this.handOverArgs(id), keys: this.deps.keys.permitKeys(kind, id), fencingToken };
    return this.script('permitForceRelease', args, parsePermitForceRelease);
  }

  /** Runs one script through the store's guard (RedisStore.call: every failure a StoreUnavailableError) and reads its reply. */
  private script<N extends ScriptName, T>(name: N, args: ScriptArgs<N>, parse: (raw: unknown) => T): Promise<T> {
    return this.deps.call(async () => parse(await this.deps.scripts.run(name, args)));
  }

  /** As listLocks: SCAN with MATCH (never KEYS), then each key read with the inspect script. */
  async listPermits(kind: PermitKind, { prefix, limit, cursor }: PermitListQuery): Promise<PermitListPage> {
    const letter = permitKindLetter(kind);
    const page = await this.deps.scanIds(this.deps.keys.lockPattern(prefix, letter), limit, cursor, (redisKey) => {
      const id = this.deps.keys.lockIdOf(redisKey, letter);
      return id !== null && id.startsWith(prefix) ? id : null;
    });
    const next = page.nextCursor;
    const found = page.ids;
    const states = await Promise.all([...found].sort().map(async (id) => ({ id, state: await this.inspectPermits(kind, id) })));
    const entries: Array<{ id: string; state: PermitState }> = [];
    for (const { id, state } of states) if (state !== null) entries.push({ id, state });
    return { entries, nextCursor: next };
  }

  /** A waiter was handed a lease: renewing it confirms it is still this waiter's and restarts its full TTL. */
  private async confirmPermit(waiter: Waiter): Promise<LeaseAcquireOutcome> {
    const { kind, id } = splitRoomKey(waiter.key);
    const decidedAt = performance.now();
    const servedBy = this.deps.servedBy(id);
    const reply = await this.permitRenewStep(kind, id, waiter.ownerToken, waiter.ttlMs);
    if (!reply.held) throw new StoreUnavailableError('a lease was handed over, but it ran out before it could be delivered');
    await this.deps.replicated(id, 'grant', servedBy, () => this.releasePermitLease(kind, id, waiter.ownerToken).catch(() => false));
    return { acquired: true, decidedAt, fencingTokens: [reply.fencingToken], expiresAtMs: reply.expiresAtMs };
  }

  private cancelPermit(waiter: Waiter) {
    const { kind, id } = splitRoomKey(waiter.key);
    const args = {
      ...this.handOverArgs(id),
      keys: this.deps.keys.permitKeys(kind, id),
      waiterId: waiter.id,
      ownerToken: waiter.ownerToken,
    };
    return this.deps.acquires.run(() => this.script('permitCancel', args, parseCancel), false);
  }

  private visitPermit(roomKeyText: string, waiters: readonly Waiter[]) {
    const { kind, id } = splitRoomKey(roomKeyText);
    const args = { ...this.handOverArgs(id), keys: this.deps.keys.permitKeys(kind, id), livenessMs: WAITER_LIVENESS_MS, waiters };
    return this.script('permitHeartbeat', args, parsePermitHeartbeat);
  }

  /** What a script needs to hand `id` to the next waiter, should it free the key (the acquire and release of every pair write it out). */
  private handOverArgs(id: string): HandOverArgs {
    return { graceMs: this.deps.graceMs, channelPrefix: this.deps.keys.grantChannelPrefix(), lockName: id };
  }
}

/** The permit wait room's key for a primitive's key: kinds apart, ids contain no space. */
function roomKey(kind: PermitKind, id: string): string {
  return `${kind} ${id}`;
}

function splitRoomKey(text: string): { kind: PermitKind; id: string } {
  const at = text.indexOf(' ');
  return { kind: text.slice(0, at) as PermitKind, id: text.slice(at + 1) };
}
