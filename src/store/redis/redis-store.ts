import { renewedFrom } from '../shared/lease-replies.js';
import { performance } from 'node:perf_hooks';
// Node's own, not the global: a test's fake timers must not hold back a release's answer.
import { setImmediate as afterThisTurn } from 'node:timers/promises';
import calculateSlot from 'cluster-key-slot';
import { Cluster } from 'ioredis';
import {
  IdempotencyKeyReusedError,
  InvalidRequestError,
  OverloadedError,
  StoreUnavailableError,
  TooManyWaitersError,
} from '../../domain/errors.js';
import { randomBase64url } from '../../domain/random.js';
import { LATE_REPLY_FRACTION } from '../../domain/freshness.js';
import { lockSetsOf, withReleaseRequest } from '../../domain/lock-store.js';
import type {
  AcquireInput,
  AcquireOutcome,
  IndexedLockState,
  LockSetStore,
  LockState,
  LockStore,
  RenewOutcome,
} from '../../domain/lock-store.js';
import type { LockSetAcquireOutcome, LockSetInput, LockSetRenewOutcome } from '../../domain/lock-store.js';
import type { ForceReleaseOutcome, LockListRow, ListPage, ListQuery, QueuedCaller, QuotaSlotOutcome } from '../../domain/lock-store.js';
import type { ReleaseRequest, ReleaseRequestInput } from '../../domain/lock-store.js';
import { connectionPatienceMs, createRedisClient, type RedisClient, type RedisConnection, type ReplicaAcks } from './client.js';
import { COMMAND_TIMED_OUT } from './command-deadline.js';
import { insideCap, KeySpace, QUOTA_INSIDE_FROM, shardCap } from './keys.js';
import { confirmOnReplicas, dataNodes, dropConnection, echoPingOn, ownerOf, subscriberFor } from './nodes.js';
import {
  MisalignedReplyError,
  parseAcquire,
  parseCancel,
  parseFlag,
  parseForceRelease,
  parseLockSetAcquire,
  parseLockSetRenew,
  parseHandOver,
  parseHeartbeat,
  parseInspect,
  parseQueue,
  parseLease,
  parseLockRelease,
  parseRequestRelease,
  parseScan,
  releaseRequestPayload,
  parseQuotaExtend,
  parseQuotaReserve,
  type AcquireReply,
  type CancelReply,
  type HandOverNotice,
  type LeaseReply,
  UnexpectedReplyError,
} from './replies.js';
import { defineScripts, type HandOverArgs, type Scripts } from './scripts.js';
import { type HandedLease, lockWaitRoom, startHeartbeat, type WaitRoom, type Waiter } from '../shared/wait-room.js';
import { WatchMarks } from './watch-marks.js';
import { RedisPermits } from './redis-permits.js';
import { ScriptLane } from './script-lane.js';
import { ContendedKeys } from './contended-keys.js';

export interface RedisStoreOptions {
  /** One Redis by URL; or give `connection` for Sentinel or a Cluster. */
  readonly url?: string;
  readonly connection?: RedisConnection;
  /**
   * Replicas that must confirm each grant and renewal (WAIT) before it is answered; with fewer, the
   * grant is rolled back and the caller gets a 503. Absent or null: answer once the primary has it.
   */
  readonly replicaAcks?: ReplicaAcks | null;
  readonly keyPrefix: string;
  /** Upper bound on one command's round trip; past it the caller gets a 503, not a hang. */
  readonly commandTimeoutMs: number;
  /** How long a lock's hash (and so its last fencing token) outlives its lease. */
  readonly fenceGraceMs: number;
  /** Most callers queued on one key at once, across all instances. */
  readonly maxWaitersPerKey?: number;
  readonly log?: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
}

/**
 * 10 SCAN calls per listing page at most: bounds one admin request's work when matching keys are
 * sparse; the page then comes back short (even empty) with a cursor to go on from.
 */
const LIST_MAX_SCAN_ROUNDS = 10;

/**
 * 3 s: an instance tells Redis its waiters are still there every heartbeat (HEARTBEAT_INTERVAL_MS). A
 * waiter whose instance died stops being refreshed and is skipped after this, so it never receives a
 * grant nobody will use for longer than that.
 */
const WAITER_LIVENESS_MS = 3000;

/**
 * 32: acquire and cancel scripts this instance has in Redis at once (ScriptLane); more wait in the
 * instance, before anything is sent. A lock's acquire costs Redis up to about half a millisecond when
 * its queue is long, so three instances' lanes keep Redis's own backlog near 50 ms, far below the
 * command timeout, while 32 in flight still keep a connection busy (at about 1 ms a round trip, tens
 * of thousands of acquires a second per instance).
 */
const ACQUIRES_IN_REDIS_MAX = 32;

/**
 * 30 s: how long a watched lock stays marked as watched in Redis (watch-marks.ts), renewed every 10 s
 * (each mark at its own time in the 10 s) while this instance is subscribed. Rare renewals keep a
 * watch's Redis work per change flat; a mark left behind only costs a PUBLISH per change until it runs out.
 */
const WATCH_MARK_MS = 30_000;
const WATCH_MARK_RENEW_MS = 10_000;

const newId = () => randomBase64url(9);

/**
 * A waiter handed the lock within this share of its TTL of being registered is answered from the
 * hand-over message (see confirm): half the share the freshness guard allows (LATE_REPLY_FRACTION), so
 * an answer taken this way is not then refused as late on its way out.
 */
const HANDED_LEASE_FRACTION = LATE_REPLY_FRACTION / 2;

/**
 * The Redis store: every operation is one Lua script, so check-and-set is atomic in Redis. Any number of
 * keyholder instances can share one Redis.
 *
 * Waiting: a caller that waits is queued in Redis (FIFO across all instances). A release or a lease
 * running out hands the lock to the first live waiter inside the same script and announces it on that
 * waiter's instance channel: one message, to one instance, per hand-over. Each instance holds one
 * subscriber connection, not one connection per waiter.
 */
/** A listing cursor: a SCAN cursor, after `<node index>-` on a Cluster. */
const LIST_CURSOR = /^(?:(0|[1-9][0-9]{0,3})-)?(0|[1-9][0-9]{0,19})$/;
const MAX_SCAN_CURSOR = 2n ** 64n - 1n;

/**
 * Where a listing goes on from. A SCAN cursor is an unsigned 64-bit number, and the node index must name
 * one of the nodes; anything else is the caller's mistake, which Redis would answer with an error that
 * must not read as the store being down.
 */
function parseListCursor(cursor: string | undefined, nodes: number): { node: number; scan: string } {
  if (cursor === undefined) return { node: 0, scan: '0' };
  const match = LIST_CURSOR.exec(cursor);
  const node = Number(match?.[1] ?? 0);
  const scan = match?.[2];
  if (scan === undefined || BigInt(scan) > MAX_SCAN_CURSOR || node >= nodes) {
    throw new InvalidRequestError('cursor', 'must be a nextCursor returned by this route');
  }
  return { node, scan };
}

export class RedisStore implements LockStore {
  readonly kind = 'redis';
  readonly lockSets: LockSetStore = lockSetsOf(this);
  /** Watch: change channel -> its listeners. One SUBSCRIBE per watched key per instance. */
  private readonly changeListeners = new Map<string, Set<() => void>>();
  /**
   * The quota's units sit in the lock's own shard (keys.ts): taken and given back inside the lock scripts,
   * one round trip per call. Only for a cap counted in every shard; a smaller one goes through the slot calls.
   */
  readonly quotaInside = true;
  readonly quotaInsideFrom = QUOTA_INSIDE_FROM;
  private readonly redis: RedisClient;
  private readonly scripts: Scripts;
  private readonly subscriber: RedisClient;
  private readonly keys: KeySpace;
  private readonly graceMs: number;
  private readonly maxWaitersPerKey: number;
  /** This process's identity for hand-over messages. */
  private readonly instanceId = newId();
  private readonly room: WaitRoom<AcquireOutcome>;
  private readonly heartbeat: NodeJS.Timeout;
  /** Counts connections made ready, so a late verdict on an old connection never drops a new one. */
  private connectionEpoch = 0;
  private probing = false;
  private readonly replicaAcks: ReplicaAcks | null;
  private readonly commandTimeoutMs: number;
  /** The acquires and cancels (of locks, lock sets and permits) this instance has in Redis: see ScriptLane. */
  private readonly acquires: ScriptLane;
  /** Keys an acquire here found held lately: their releases leave at once (see ContendedKeys). */
  private readonly contended = new ContendedKeys();
  /** Semaphores and read/write locks, on this store's connection, scripts and channel. */
  readonly permits: RedisPermits;
  /** The watched locks' marks in Redis: the scripts publish change notices for marked locks only. */
  private readonly watchMarks = new WatchMarks(
    (id) =>
      this.call(async () =>
        parseFlag('watchMark', await this.scripts.run('watchMark', { lockKey: this.keys.lock(id), keepMs: WATCH_MARK_MS })),
      ),
    WATCH_MARK_RENEW_MS,
  );

  constructor(options: RedisStoreOptions) {
    this.keys = new KeySpace(options.keyPrefix);
    this.graceMs = options.fenceGraceMs;
    this.maxWaitersPerKey = options.maxWaitersPerKey ?? 1000;
    const connection = options.connection ?? options.url;
    if (connection === undefined) throw new TypeError('RedisStore needs a url or a connection');
    this.replicaAcks = options.replicaAcks ?? null;
    this.commandTimeoutMs = options.commandTimeoutMs;
    // An acquire that could not even be sent within a command timeout is refused (503 overloaded): by
    // then the caller would have been told the store timed out.
    this.acquires = new ScriptLane(ACQUIRES_IN_REDIS_MAX, options.commandTimeoutMs);
    const log = options.log;
    this.redis = createRedisClient(connection, {
      commandTimeoutMs: options.commandTimeoutMs,
      // Many concurrent lock calls, few round trips and syscalls: on a Cluster through ioredis's
      // auto-pipelining (per node); on one Redis the scripts batch a tick's writes themselves, at less
      // CPU per call (see defineScripts).
      autoPipelining: typeof connection !== 'string' && connection.mode === 'cluster',
      onReady: () => {
        this.connectionEpoch++;
        log?.info({ store: 'redis' }, 'connected to Redis');
      },
      onLost: (err) => log?.warn({ store: 'redis', err: err.message }, 'Redis connection error; answering 503 until it is back'),
    });
    this.scripts = defineScripts(this.redis);
    // The subscriber may queue its SUBSCRIBE until connected and re-subscribes after a reconnect. Its
    // commands are retried across reconnects (maxRetriesPerRequest: null): with the lock connection's 0,
    // ioredis's own re-subscribe after a connection reset fails with an error nobody can catch, and
    // the process dies (found by the network-fault scenario).
    this.subscriber = subscriberFor(this.redis);
    this.subscriber.on('error', () => undefined);
    this.subscriber.on('message', (channel: string, message: string) => {
      const listeners = this.changeListeners.get(channel);
      if (listeners !== undefined) for (const listener of listeners) listener();
      else this.onHandOverMessage(message);
    });
    // Notices published while the subscriber was away are lost: every watcher reads the state again.
    this.subscriber.on('ready', () => {
      for (const listeners of this.changeListeners.values()) for (const listener of listeners) listener();
    });
    this.subscriber.subscribe(this.keys.grantChannelPrefix() + this.instanceId).catch(() => undefined);

    this.room = lockWaitRoom({
      confirm: (waiter, handed) => this.confirm(waiter, handed),
      cancel: (waiter) => this.cancel(waiter),
      release: (key, ownerToken) => this.release(key, ownerToken),
      visit: (key, waiters) => this.visit(key, waiters),
    });
    this.permits = new RedisPermits({
      redis: this.redis,
      scripts: this.scripts,
      keys: this.keys,
      instanceId: this.instanceId,
      graceMs: this.graceMs,
      maxWaitersPerKey: this.maxWaitersPerKey,
      livenessMs: WAITER_LIVENESS_MS,
      call: (run) => this.call(run),
      acquires: this.acquires,
      scanIds: (pattern, limit, cursor, idOf) => this.scanIds(pattern, limit, cursor, idOf),
      // The permit's id tags its keys like a lock's, so the lock key names the same node and slot.
      replicated: (id, what, servedBy, giveBack) => this.replicated(id, '', what, servedBy, giveBack),
      servedBy: (id) => this.servedBy(id),
      watchChannel: (channel, onChange) => this.watchChannel(channel, onChange),
    });
    this.heartbeat = startHeartbeat(() => {
      this.room.visitAll();
      this.permits.visitAll();
    });
  }

  async acquire(input: AcquireInput): Promise<AcquireOutcome> {
    const waitMs = input.waitMs ?? 0;
    // The lease is decided from the moment the script is sent (after its turn in the lane), and the
    // node serving the key is read then too.
    let decidedAt = 0;
    let servedBy: string | null = null;
    const send = (waitFor: number, waiterId: string) =>
      this.acquires.run(() => {
        decidedAt = performance.now();
        servedBy = this.servedBy(input.id);
        return this.runAcquire(input, waitFor, waiterId);
      }, true);
    if (waitMs <= 0) {
      input.signal?.throwIfAborted();
      const reply = await send(0, '-');
      return this.settle(reply, decidedAt, input, servedBy);
    }
    // Registered before the script runs: a hand-over message may arrive before the script's reply.
    const waiter = this.room.register({ id: newId(), key: input.id, ownerToken: input.ownerToken, ttlMs: input.ttlMs });
    const reply = await waiter.enter(input.signal, () => send(waitMs, waiter.id));
    if (reply.kind === 'queued') {
      const outcome = await waiter.wait(waitMs, reply.retryAfterMs, input.signal);
      if (outcome.acquired && (input.lockDelayMs ?? 0) > 0) await this.setLockDelay(input);
      return outcome;
    }
    waiter.drop();
    return this.settle(reply, decidedAt, input, servedBy);
  }

  /**
   * A waiter's record does not carry its lock-delay: the lease handed to it gets it here, right after
   * the hand-over was answered (with at least three quarters of its TTL left, or confirmed by a renew that
   * restarted it: the lease does not expire in between).
   * Failing, the lease is given back: a lease without the delay it was asked with is not handed out.
   */
  private async setLockDelay({ id: key, ownerToken, lockDelayMs }: AcquireInput): Promise<void> {
    try {
      const set = await this.call(async () =>
        parseFlag(
          'lockDelay',
          await this.scripts.run('lockDelay', { lockKey: this.keys.lock(key), ownerToken, lockDelayMs: lockDelayMs ?? 0 }),
        ),
      );
      if (!set) throw new StoreUnavailableError('the lock was handed over, but its lease ended before its lock-delay was set');
    } catch (err) {
      await this.release(key, ownerToken).catch(() => false);
      throw err;
    }
  }

  private runAcquire(
    { id: key, ownerToken, ttlMs, holder, idempotencyKey, lockDelayMs, maxHeldInNamespace }: AcquireInput,
    waitMs: number,
    waiterId: string,
  ): Promise<AcquireReply> {
    return this.call(async () => {
      // Every property written out: spreading another object into this literal (`...handOverArgs`)
      // sent V8 down a slow path that cost about 40 µs of CPU per acquire + release pair.
      const raw = await this.scripts.run('acquire', {
        graceMs: this.graceMs,
        channelPrefix: this.keys.grantChannelPrefix(),
        lockName: key,
        keys: this.keys.lockKeys(key),
        ownerToken,
        ttlMs,
        holder: holder ?? '',
        waitMs,
        waiterId,
        instanceId: this.instanceId,
        maxWaiters: this.maxWaitersPerKey,
        livenessMs: WAITER_LIVENESS_MS,
        idempotencyKey: idempotencyKey ?? '',
        lockDelayMs: lockDelayMs ?? 0,
        maxQuotaSlots: insideCap(maxHeldInNamespace ?? 0),
      });
      const reply = parseAcquire(raw);
      // acquire.lua queues only a caller that waits.
      if (reply.kind === 'queued' && waitMs <= 0) throw new UnexpectedReplyError('acquire', raw);
      if (reply.kind === 'held' || reply.kind === 'queued' || reply.kind === 'queue_full') this.contended.mark(key, reply.retryAfterMs);
      return reply;
    });
  }

  /** The answer to an acquire the script settled at once (not queued). */
  private async settle(
    reply: AcquireReply,
    decidedAt: number,
    { id: key, ownerToken }: AcquireInput,
    servedBy: string | null,
  ): Promise<AcquireOutcome> {
    switch (reply.kind) {
      case 'granted':
        await this.replicated(key, ownerToken, 'grant', servedBy);
        return { acquired: true, fencingToken: reply.fencingToken, expiresAtMs: reply.expiresAtMs, decidedAt };
      case 'replayed': {
        const { fencingToken, expiresAtMs, ownerToken, holder } = reply;
        return { acquired: true, fencingToken, expiresAtMs, decidedAt, replayed: { ownerToken, holder } };
      }
      case 'queue_full':
        throw new TooManyWaitersError('key', reply.retryAfterMs);
      case 'idempotency_key_reused':
        throw new IdempotencyKeyReusedError();
      case 'quota_full':
        return { acquired: false, retryAfterMs: reply.retryAfterMs, quotaFull: true };
      default:
        return { acquired: false, retryAfterMs: reply.retryAfterMs };
    }
  }

  async renew(key: string, ownerToken: string, ttlMs: number): Promise<RenewOutcome> {
    const servedBy = this.servedBy(key);
    const reply = await this.renewLease(key, ownerToken, ttlMs);
    if (!reply.held) return { renewed: false };
    await this.replicated(key, ownerToken, 'renewal', servedBy);
    return renewedFrom(reply);
  }

  /** One script on the lock record (field r): the lease with `fencingToken`, if live, keeps the request. */
  async requestRelease(key: string, fencingToken: number, request: ReleaseRequestInput): Promise<ReleaseRequest | null> {
    return this.call(async () =>
      parseRequestRelease(
        'request-release',
        await this.scripts.run('requestRelease', {
          lockKey: this.keys.lock(key),
          fencingToken,
          payload: releaseRequestPayload(request),
          channelPrefix: this.keys.grantChannelPrefix(),
          lockName: key,
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
  async release(key: string, ownerToken: string): Promise<boolean> {
    return this.call(async () => {
      // Written out, not spread from handOverArgs: see runAcquire.
      const { released, handedTo } = parseLockRelease(
        await this.scripts.run(
          'release',
          {
            graceMs: this.graceMs,
            channelPrefix: this.keys.grantChannelPrefix(),
            lockName: key,
            keys: this.keys.lockKeys(key),
            ownerToken,
            instanceId: this.instanceId,
          },
          // One that may hand the lock over leaves at once; the others with the turn's other calls.
          this.contended.has(key),
        ),
      );
      if (handedTo !== undefined) {
        this.handedOver(handedTo);
        // The next holder's answer leaves first: it is written by this turn's microtasks, and the release
        // is answered after them. On a hot key the next hand-off waits for that holder, not for this caller.
        await afterThisTurn();
      }
      return released;
    });
  }

  async inspect(key: string): Promise<LockState | null> {
    const reply = await this.call(async () => parseInspect(await this.scripts.run('inspect', { keys: this.keys.lockKeys(key) })));
    if (!reply.held) return null;
    const { fencingToken, holder, expiresAtMs, ttlRemainingMs, waiters, releaseRequested } = reply;
    return withReleaseRequest({ holder, fencingToken, expiresAtMs, ttlRemainingMs, waiters }, releaseRequested);
  }

  async inspectIndexed(key: string): Promise<IndexedLockState> {
    const reply = await this.call(async () => parseInspect(await this.scripts.run('inspect', { keys: this.keys.lockKeys(key) })));
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

  /**
   * Subscribes to the key's change channel on the subscriber connection (one SUBSCRIBE per key, however
   * many local listeners). Resolves once Redis confirmed the subscription; while Redis is unreachable,
   * rejects with a 503 instead of waiting (the subscriber itself would wait for ever).
   */
  watchChanges(key: string, onChange: () => void): Promise<() => void> {
    return this.watchChannel(this.keys.changeChannel(key), onChange, key);
  }

  /**
   * The subscription behind watchChanges, for any change channel (the permits' too). `markKey`: the lock
   * whose scripts publish only while it is marked as watched (watch-marks.ts); permits always publish.
   */
  private async watchChannel(channel: string, onChange: () => void, markKey?: string): Promise<() => void> {
    let listeners = this.changeListeners.get(channel);
    const listener = () => onChange();
    if (listeners === undefined) {
      listeners = new Set();
      this.changeListeners.set(channel, listeners);
      listeners.add(listener);
      const fresh = listeners;
      try {
        await this.call(() => this.subscribeWithin(channel));
        // Marked after subscribing: a change the scripts publish from now on reaches this instance.
        if (markKey !== undefined) {
          await this.watchMarks.add(markKey, () => {
            for (const each of fresh) each();
          });
        }
      } catch (err) {
        listeners.delete(listener);
        if (listeners.size === 0 && this.changeListeners.get(channel) === listeners) {
          this.changeListeners.delete(channel);
          this.subscriber.unsubscribe(channel).catch(() => undefined);
        }
        throw err;
      }
    } else {
      listeners.add(listener);
    }
    const mine = listeners;
    return () => {
      mine.delete(listener);
      if (mine.size === 0 && this.changeListeners.get(channel) === mine) {
        this.changeListeners.delete(channel);
        if (markKey !== undefined) this.watchMarks.delete(markKey);
        this.subscriber.unsubscribe(channel).catch(() => undefined);
      }
    };
  }

  private subscribeWithin(channel: string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(COMMAND_TIMED_OUT)), this.commandTimeoutMs);
      this.subscriber.subscribe(channel).then(
        () => {
          clearTimeout(timer);
          resolve();
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err instanceof Error ? err : new Error(String(err)));
        },
      );
    });
  }

  async acquireSet({ keys, ownerToken, ttlMs, holder, lockDelayMs }: LockSetInput): Promise<LockSetAcquireOutcome> {
    this.checkOneSlot(keys);
    let decidedAt = 0;
    let servedBy: string | null = null;
    const reply = await this.acquires.run(() => {
      decidedAt = performance.now();
      // On a Cluster a set's keys share one slot (checkOneSlot): its first key names the master that serves them all.
      servedBy = this.servedBy(keys[0] as string);
      return this.call(async () =>
        parseLockSetAcquire(
          await this.scripts.run('lockSetAcquire', {
            members: keys.map((id) => ({ keys: this.keys.lockKeys(id), name: id })),
            ownerToken,
            ttlMs,
            holder: holder ?? '',
            graceMs: this.graceMs,
            lockDelayMs: lockDelayMs ?? 0,
            channelPrefix: this.keys.grantChannelPrefix(),
          }),
          keys.length,
        ),
      );
    }, true);
    if (!reply.granted) return { acquired: false, retryAfterMs: reply.retryAfterMs, busyKey: keys[reply.busyIndex] as string };
    if (this.replicaAcks) {
      // Replica acknowledgement covers the set as one grant: not confirmed in time, the whole set goes back.
      try {
        await this.replicated(keys[0] as string, ownerToken, 'grant', servedBy);
      } catch (err) {
        await this.releaseSet(keys, ownerToken).catch(() => false);
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
    if (!(this.redis instanceof Cluster) || ids.length < 2) return;
    const slot = calculateSlot(this.keys.lock(ids[0] as string));
    if (ids.some((id) => calculateSlot(this.keys.lock(id)) !== slot)) {
      throw new InvalidRequestError(
        'keys',
        'on a Redis Cluster a lock set must have all its keys in one shard of the namespace, and these are not; lock them one by one, or use a single Redis (see docs/limits.md)',
      );
    }
  }

  async renewSet(keys: readonly string[], ownerToken: string, ttlMs: number): Promise<LockSetRenewOutcome> {
    const servedBy = this.servedBy(keys[0] as string);
    const reply = await this.call(async () =>
      parseLockSetRenew(
        await this.scripts.run('lockSetRenew', {
          lockKeys: keys.map((id) => this.keys.lock(id)),
          ownerToken,
          ttlMs,
          graceMs: this.graceMs,
        }),
        keys.length,
      ),
    );
    if (reply.renewed) await this.replicated(keys[0] as string, ownerToken, 'renewal', servedBy);
    return reply;
  }

  async releaseSet(keys: readonly string[], ownerToken: string): Promise<boolean> {
    return this.call(async () =>
      parseFlag(
        'lockSetRelease',
        await this.scripts.run('lockSetRelease', {
          members: keys.map((id) => ({ keys: this.keys.lockKeys(id), name: id })),
          ownerToken,
          graceMs: this.graceMs,
          channelPrefix: this.keys.grantChannelPrefix(),
        }),
      ),
    );
  }

  async queue(key: string, limit: number): Promise<QueuedCaller[]> {
    const queued = await this.call(async () =>
      parseQueue(await this.scripts.run('queue', { keys: this.keys.lockKeys(key), limit, layout: 'lock' })),
    );
    return queued.map(({ holder, waitingSinceMs }, i) => ({ position: i + 1, holder, waitingSinceMs }));
  }

  async forceRelease(key: string, fencingToken?: number): Promise<ForceReleaseOutcome> {
    const reply = await this.call(async () =>
      parseForceRelease(await this.scripts.run('forceRelease', { ...this.handOverArgs(key), keys: this.keys.lockKeys(key), fencingToken })),
    );
    return reply.released
      ? { released: true, holder: reply.holder, fencingToken: reply.fencingToken, evictedOwnerToken: reply.ownerToken }
      : { released: false };
  }

  /**
   * SCAN with MATCH and COUNT (never KEYS): each call walks a bounded part of the keyspace, so a listing
   * never blocks Redis however many keys it holds. On a Cluster every master is walked in turn (each
   * holds only its own slots); the cursor is then `<master index>-<SCAN cursor>`. The keys found are read
   * with the inspect script (on the Redis clock, without the owner token); lock hashes that only
   * remember a fencing token are skipped. A page may hold a few more or fewer than `limit` locks; only a
   * null cursor means the end.
   */
  async list({ prefix, limit, cursor }: ListQuery): Promise<ListPage> {
    const page = await this.scanIds(this.keys.lockPattern(prefix), limit, cursor, (redisKey) => this.keys.lockIdOf(redisKey));
    const states = await Promise.all(page.ids.map(async (id) => ({ id, state: await this.inspect(id) })));
    const locks: LockListRow[] = [];
    for (const { id, state } of states) if (state !== null) locks.push({ id, ...state });
    return { locks, nextCursor: page.nextCursor };
  }

  /**
   * One listing page of ids: SCAN rounds with MATCH `pattern` over every data node in turn (one, or each
   * Cluster master), until `limit` ids or LIST_MAX_SCAN_ROUNDS. `idOf` turns a key into an id (null: not
   * one of the listed kind). Shared by the lock and the permit listings.
   */
  private async scanIds(
    pattern: string,
    limit: number,
    cursor: string | undefined,
    idOf: (redisKey: string) => string | null,
  ): Promise<{ ids: string[]; nextCursor: string | null }> {
    const nodes = await this.call(async () => this.dataNodes());
    let { node, scan } = parseListCursor(cursor, nodes.length);
    const found = new Set<string>();
    for (let round = 0; round < LIST_MAX_SCAN_ROUNDS && node < nodes.length; round++) {
      const target = nodes[node] as (typeof nodes)[number];
      const page = await this.call(async () => parseScan(await target.scan(scan, 'MATCH', pattern, 'COUNT', limit)));
      scan = page.cursor;
      for (const redisKey of page.keys) {
        const id = idOf(redisKey);
        if (id !== null) found.add(id);
      }
      if (scan === '0') node++;
      if (found.size >= limit) break;
    }
    const nextCursor = node >= nodes.length ? null : nodes.length === 1 ? scan : `${node}-${scan}`;
    return { ids: [...found], nextCursor };
  }

  async reserveQuotaSlot(namespace: string, quotaSlotId: string, ttlMs: number, maxQuotaSlots: number): Promise<QuotaSlotOutcome> {
    const args = {
      quota: this.keys.quotaFor(namespace, quotaSlotId, maxQuotaSlots),
      quotaSlotId,
      ttlMs,
      maxQuotaSlots: shardCap(maxQuotaSlots),
    };
    return this.call(async () => parseQuotaReserve(await this.scripts.run('quotaReserve', args)));
  }

  async extendQuotaSlot(namespace: string, quotaSlotId: string, expiresAtMs: number, maxQuotaSlots: number): Promise<void> {
    const args = { quota: this.keys.quotaFor(namespace, quotaSlotId, maxQuotaSlots), quotaSlotId, expiresAtMs };
    await this.call(async () => parseQuotaExtend(await this.scripts.run('quotaExtend', args)));
  }

  async freeQuotaSlot(namespace: string, quotaSlotId: string, maxQuotaSlots: number): Promise<void> {
    await this.call(() => this.scripts.run('quotaFree', { quota: this.keys.quotaFor(namespace, quotaSlotId, maxQuotaSlots), quotaSlotId }));
  }

  async ping(): Promise<void> {
    await this.call(() => this.echoPing());
  }

  /**
   * PING with a message echoes it: a reply meant for another call cannot pass for this one. On a
   * Cluster every master is asked (a PING without a key would reach one node at random), and the store
   * counts as up while any of them answers: every instance shares the Cluster, so a load balancer that
   * took them all out for one dead master would stop the other masters' namespaces too. Calls on the
   * dead master's namespaces answer 503 on their own. A reply out of step fails the ping either way.
   */
  private async echoPing(): Promise<void> {
    const results = await Promise.allSettled(this.dataNodes().map((node) => echoPingOn(node)));
    const failures = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as Error] : []));
    const misaligned = failures.find((err) => err instanceof MisalignedReplyError);
    if (misaligned !== undefined) throw misaligned;
    if (failures.length === results.length && failures[0] !== undefined) throw failures[0];
  }

  /** The nodes holding data (every master of a Cluster); none known is an outage. */
  private dataNodes(): ReturnType<typeof dataNodes> {
    const nodes = dataNodes(this.redis);
    if (nodes.length === 0) throw new StoreUnavailableError('no Redis node is known yet');
    return nodes;
  }

  /**
   * After a command timed out: one echo PING goes behind everything already sent. Replies come back in
   * order, so if it gets its own echo every earlier reply has been read and the connection is in step;
   * if it reads another call's reply, a reply was lost and the connection is replaced. A PING that
   * gets no answer at all for connectionPatienceMs means a broken connection (replaced too); one
   * only slower than a lock call's timeout is a slow Redis, which a new connection would not make
   * faster: replacing it at once (as this probe did, with the lock calls' timeout) kept an instance
   * reconnecting, and unavailable, for seconds after a Redis restart on a loaded host. Lock calls keep
   * failing fast meanwhile, and a reply out of step is still caught by every call's own echo. One
   * probe at a time, so a burst of timeouts costs one PING. On a Cluster each master's connection is
   * probed, and only one that fails is replaced: a master that died must not cost the connections to
   * the others (their namespaces keep being served).
   */
  private probeAlignment(): void {
    if (this.probing) return;
    this.probing = true;
    const epoch = this.connectionEpoch;
    const nodes = dataNodes(this.redis);
    const patienceMs = connectionPatienceMs(this.commandTimeoutMs);
    void Promise.all(nodes.map((node) => echoPingOn(node, patienceMs).catch(() => this.replaceConnection(epoch, node)))).finally(() => {
      this.probing = false;
    });
  }

  /** Drops a connection (ioredis reconnects), unless the client has been reconnected since `epoch`. */
  private replaceConnection(epoch: number, node?: ReturnType<typeof dataNodes>[number]): void {
    if (epoch !== this.connectionEpoch || this.redis.status !== 'ready') return;
    dropConnection(this.redis, node);
  }

  async close(): Promise<void> {
    clearInterval(this.heartbeat);
    this.watchMarks.close();
    await this.room.closeAll(new StoreUnavailableError('the store is closing'));
    await this.permits.closeAll(new StoreUnavailableError('the store is closing'));
    this.subscriber.disconnect();
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
  }

  private renewLease(key: string, ownerToken: string, ttlMs: number): Promise<LeaseReply> {
    return this.call(async () =>
      parseLease(
        'renew',
        await this.scripts.run('renew', {
          lockKey: this.keys.lock(key),
          quota: this.keys.lockKeys(key).quota,
          ownerToken,
          ttlMs,
          graceMs: this.graceMs,
        }),
      ),
    );
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
  private async confirm(waiter: Waiter, handed?: HandedLease): Promise<AcquireOutcome> {
    if (
      handed !== undefined &&
      this.replicaAcks === null &&
      performance.now() - handed.registeredAt < waiter.ttlMs * HANDED_LEASE_FRACTION
    ) {
      return { acquired: true, fencingToken: handed.fencingToken, expiresAtMs: handed.expiresAtMs, decidedAt: handed.registeredAt };
    }
    const decidedAt = performance.now();
    const servedBy = this.servedBy(waiter.key);
    const reply = await this.renewLease(waiter.key, waiter.ownerToken, waiter.ttlMs);
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
    await this.replicated(waiter.key, waiter.ownerToken, 'grant', servedBy);
    return { acquired: true, fencingToken: reply.fencingToken, expiresAtMs: reply.expiresAtMs, decidedAt };
  }

  /** In the acquire lane (never refused): a burst's waits end together, and so do their cancels. */
  private cancel(waiter: Waiter): Promise<CancelReply> {
    return this.acquires.run(
      () =>
        this.call(async () =>
          parseCancel(
            await this.scripts.run('cancel', { keys: this.keys.lockKeys(waiter.key), waiterId: waiter.id, ownerToken: waiter.ownerToken }),
          ),
        ),
      false,
    );
  }

  private async visit(key: string, waiters: readonly Waiter[]) {
    const { remainingLeaseMs, grantedWaiterId } = await this.call(async () =>
      parseHeartbeat(
        await this.scripts.run('heartbeat', {
          ...this.handOverArgs(key),
          keys: this.keys.lockKeys(key),
          livenessMs: WAITER_LIVENESS_MS,
          waiters,
        }),
      ),
    );
    return { remainingLeaseMs, grantedWaiterIds: grantedWaiterId === null ? [] : [grantedWaiterId] };
  }

  private onHandOverMessage(message: string): void {
    const notice = parseHandOver(message);
    if (notice !== null) this.handedOver(notice);
  }

  /** A hand-over notice, by message or in a release's reply (see release). */
  private handedOver(notice: HandOverNotice): void {
    // Waiter ids are unique across both rooms: the one that does not know it ignores it.
    this.room.granted(notice.waiterId, notice);
    this.permits.granted(notice.waiterId);
  }

  /** With replica acks on a Cluster: the master serving `key` before its script runs (see confirmOnReplicas). */
  private servedBy(key: string): string | null {
    return this.replicaAcks ? ownerOf(this.redis, this.keys.lock(key)) : null;
  }

  /** What a script needs to hand `key` to the next waiter, should it free the lock (the acquire and release of every pair write it out). */
  private handOverArgs(key: string): HandOverArgs {
    return { graceMs: this.graceMs, channelPrefix: this.keys.grantChannelPrefix(), lockName: key };
  }

  /**
   * With replica acknowledgement on: WAIT on the same connection that ran the script (WAIT counts the
   * replicas that have every write this connection made so far, and it cannot run inside a script; on
   * a Cluster that is the connection to the lock's master, see confirmOnReplicas).
   * Too few in time: the lease is given back by its owner token (one atomic script, so a lease someone
   * else took meanwhile is untouched) and the caller gets a 503, never a lease that a failover could
   * hand to someone else. A renewal that was not confirmed is NOT given back: its holder still relies
   * on the lease it was last confirmed (until that one's end), so taking the lock away now could hand
   * it to a second caller inside that lease. The caller gets a 503 and keeps the end it knew.
   */
  private async replicated(
    key: string,
    ownerToken: string,
    what: 'grant' | 'renewal',
    servedBy: string | null,
    // A semaphore permit or read/write lease is given back through its own script (redis-permits.ts).
    giveBack: () => Promise<unknown> = () => this.release(key, ownerToken).catch(() => false),
  ): Promise<void> {
    const acks = this.replicaAcks;
    if (!acks) return;
    const rollBack = () => (what === 'grant' ? giveBack() : Promise.resolve(false));
    let confirmed: number;
    try {
      const lockKey = this.keys.lock(key);
      confirmed = await this.call(() => confirmOnReplicas(this.redis, lockKey, servedBy, acks.minReplicas, acks.timeoutMs));
    } catch (err) {
      // The connection broke or timed out: try to give the lease back; if that cannot reach Redis
      // either, the lease runs out by its TTL. The caller is told 503 either way.
      void rollBack();
      throw err;
    }
    if (confirmed >= acks.minReplicas) return;
    await rollBack();
    throw new StoreUnavailableError(
      `the ${what} reached ${confirmed} of ${acks.minReplicas} replicas within ${acks.timeoutMs} ms and was rolled back`,
    );
  }

  /**
   * Runs one Redis call; every failure (disconnected, timed out, script error, reply of the wrong
   * shape) becomes StoreUnavailableError, because none of them is a certain answer.
   */
  private async call<T>(run: () => Promise<T>): Promise<T> {
    if (this.redis.status !== 'ready') {
      throw new StoreUnavailableError(`Redis is not connected (${this.redis.status})`);
    }
    try {
      return await run();
    } catch (err) {
      // A reply meant for another call: this connection's replies are out of step; replace it.
      if (err instanceof MisalignedReplyError) this.replaceConnection(this.connectionEpoch);
      // After a timeout the reply may only be late (Redis slow), or lost for good: find out.
      else if ((err as Error).message === COMMAND_TIMED_OUT) this.probeAlignment();
      throw new StoreUnavailableError(`Redis call failed: ${(err as Error).message}`, 1000, { cause: err });
    }
  }
}
