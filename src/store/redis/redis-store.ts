import { Redis } from 'ioredis';
import { StoreUnavailableError } from '../../domain/errors.js';
import type { AcquireInput, AcquireOutcome, LockState, LockStore, RenewOutcome } from '../store.js';
import type { ForceReleaseOutcome, HeldLock, ListPage, ListQuery, SlotOutcome } from '../store.js';
import { defineAdminScripts, parseForceRelease, parseScan, parseSlotExtend, parseSlotReserve } from './admin-scripts.js';
import { KeySpace } from './keys.js';
import { parseAcquire, parseInspect, parseRelease, parseRenew } from './replies.js';
import { defineScripts } from './scripts.js';

export interface RedisStoreOptions {
  readonly url: string;
  readonly keyPrefix: string;
  /** Upper bound on one command's round trip; past it the caller gets a 503, not a hang. */
  readonly commandTimeoutMs: number;
  /** How long a lock's hash (and so its last fencing token) outlives its lease. */
  readonly fenceGraceMs: number;
  readonly log?: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
}

/**
 * 10 SCAN calls per listing page at most: bounds one admin request's work when matching keys are
 * sparse; the page then comes back short (even empty) with a cursor to go on from.
 */
const LIST_MAX_SCAN_ROUNDS = 10;

/** Reconnect quickly at first, then every second, for ever: the service recovers by itself. */
const RECONNECT_MAX_DELAY_MS = 1000;

/**
 * The Redis store: every operation is one Lua script, so check-and-set is atomic in Redis. Any number of
 * keyholder instances can share one Redis.
 */
export class RedisStore implements LockStore {
  readonly kind = 'redis';
  private readonly redis: Redis;
  private readonly keys: KeySpace;
  private readonly graceMs: number;

  constructor(options: RedisStoreOptions) {
    this.keys = new KeySpace(options.keyPrefix);
    this.graceMs = options.fenceGraceMs;
    this.redis = new Redis(options.url, {
      commandTimeout: options.commandTimeoutMs,
      connectTimeout: Math.max(options.commandTimeoutMs, 1000),
      // Fail closed at once while disconnected instead of queueing requests that would be answered late.
      enableOfflineQueue: false,
      // A command in flight when the connection drops is NOT re-sent: its outcome is unknown, and the
      // caller is told so (503). Re-sending an acquire could grant a lease nobody knows the token of.
      maxRetriesPerRequest: 0,
      retryStrategy: (attempt) => Math.min(attempt * 50, RECONNECT_MAX_DELAY_MS),
      // Commands issued in the same tick share one round trip: many concurrent lock calls, few syscalls.
      enableAutoPipelining: true,
      lazyConnect: false,
    });
    defineScripts(this.redis);
    defineAdminScripts(this.redis);
    const log = options.log;
    let wasReady = false;
    this.redis.on('ready', () => {
      wasReady = true;
      log?.info({ store: 'redis' }, 'connected to Redis');
    });
    this.redis.on('error', (err: Error) => {
      // Logged once per outage, not once per reconnect attempt.
      if (wasReady) log?.warn({ store: 'redis', err: err.message }, 'Redis connection error; answering 503 until it is back');
      wasReady = false;
    });
  }

  async acquire({ key, ownerToken, ttlMs, holder }: AcquireInput): Promise<AcquireOutcome> {
    const reply = await this.call(async () =>
      parseAcquire(await this.redis.khAcquire(this.keys.lock(key), ownerToken, ttlMs, holder ?? '', this.graceMs)),
    );
    return reply.granted
      ? { acquired: true, fencingToken: reply.fencingToken, expiresAtMs: reply.expiresAtMs }
      : { acquired: false, retryAfterMs: reply.retryAfterMs };
  }

  async renew(key: string, ownerToken: string, ttlMs: number): Promise<RenewOutcome> {
    const reply = await this.call(async () =>
      parseRenew(await this.redis.khRenew(this.keys.lock(key), ownerToken, ttlMs, this.graceMs)),
    );
    return reply.renewed
      ? { renewed: true, fencingToken: reply.fencingToken, expiresAtMs: reply.expiresAtMs }
      : { renewed: false };
  }

  async release(key: string, ownerToken: string): Promise<boolean> {
    return this.call(async () => parseRelease(await this.redis.khRelease(this.keys.lock(key), ownerToken, this.graceMs)));
  }

  async inspect(key: string): Promise<LockState | null> {
    const reply = await this.call(async () => parseInspect(await this.redis.khInspect(this.keys.lock(key))));
    if (!reply.held) return null;
    return {
      holder: reply.holder,
      fencingToken: reply.fencingToken,
      expiresAtMs: reply.expiresAtMs,
      ttlRemainingMs: reply.ttlRemainingMs,
    };
  }

  async forceRelease(key: string): Promise<ForceReleaseOutcome> {
    const reply = await this.call(async () => parseForceRelease(await this.redis.khForceRelease(this.keys.lock(key), this.graceMs)));
    return reply.released
      ? { released: true, holder: reply.holder, fencingToken: reply.fencingToken, evictedOwnerToken: reply.ownerToken }
      : { released: false };
  }

  /**
   * SCAN with MATCH and COUNT (never KEYS): each call walks a bounded part of the keyspace, so a listing
   * never blocks Redis however many keys it holds. The keys found are read with the inspect script (on
   * the Redis clock, without the owner token); lock hashes that only remember a fencing token are
   * skipped. A page may hold a few more or fewer than `limit` locks; only a null cursor means the end.
   */
  async list({ prefix, limit, cursor }: ListQuery): Promise<ListPage> {
    const pattern = this.keys.lockPattern(prefix);
    let next = cursor ?? '0';
    const found = new Set<string>();
    for (let round = 0; round < LIST_MAX_SCAN_ROUNDS; round++) {
      const page = await this.call(async () => parseScan(await this.redis.scan(next, 'MATCH', pattern, 'COUNT', limit)));
      next = page.cursor;
      for (const redisKey of page.keys) {
        const id = this.keys.lockIdOf(redisKey);
        if (id !== null) found.add(id);
      }
      if (next === '0' || found.size >= limit) break;
    }
    const states = await Promise.all([...found].map(async (id) => ({ id, state: await this.inspect(id) })));
    const locks: HeldLock[] = [];
    for (const { id, state } of states) if (state !== null) locks.push({ key: id, ...state });
    return { locks, nextCursor: next === '0' ? null : next };
  }

  async reserveSlot(namespace: string, slotId: string, ttlMs: number, maxSlots: number): Promise<SlotOutcome> {
    return this.call(async () =>
      parseSlotReserve(await this.redis.khSlotReserve(this.keys.slots(namespace), slotId, ttlMs, maxSlots)),
    );
  }

  async extendSlot(namespace: string, slotId: string, expiresAtMs: number): Promise<void> {
    await this.call(async () => parseSlotExtend(await this.redis.khSlotExtend(this.keys.slots(namespace), slotId, expiresAtMs)));
  }

  async freeSlot(namespace: string, slotId: string): Promise<void> {
    await this.call(() => this.redis.zrem(this.keys.slots(namespace), slotId));
  }

  async ping(): Promise<void> {
    await this.call(() => this.redis.ping());
  }

  async close(): Promise<void> {
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
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
      throw new StoreUnavailableError(`Redis call failed: ${(err as Error).message}`, 1000, { cause: err });
    }
  }
}
