import { renewedFrom } from '../shared/lease-replies.js';
import { withReleaseRequest } from '../../domain/permit-store.js';
import { performance } from 'node:perf_hooks';
import { Etcd3, type IKeyValue, type IRequestOp, type ITxnRequest, type ITxnResponse, type Lease } from 'etcd3';
import { IdempotencyKeyReusedError, InvalidRequestError, StoreUnavailableError, TooManyWaitersError } from '../../domain/errors.js';
import { compareIdempotencyKeys } from '../../domain/idempotency.js';
import { randomBase64url } from '../../domain/random.js';
import { monotonicWallClock, type Clock } from '../shared/clock.js';
import type { CancelReply, LeaseReply } from '../shared/lease-replies.js';
import { lockWaitRoom, startHeartbeat, type WaitRoom, type Waiter } from '../shared/wait-room.js';
import {
  lockSetsOf,
  type AcquireInput,
  type AcquireOutcome,
  type ForceReleaseOutcome,
  type LockListRow,
  type IndexedLockState,
  type ListPage,
  type ListQuery,
  type LockSetAcquireOutcome,
  type LockSetInput,
  type LockSetRenewOutcome,
  type LockSetStore,
  type LockState,
  type LockStore,
  type QueuedCaller,
  type ReleaseRequest,
  type ReleaseRequestInput,
  type RenewOutcome,
  type QuotaSlotOutcome,
} from '../../domain/lock-store.js';
import { HandOverWatches } from './etcd-watches.js';
import { EtcdKeys } from './etcd-keys.js';
import { EtcdPermits } from './etcd-permits.js';
import type { Observed, StoredReleaseRequest, WaiterRecordBase } from './etcd-records.js';
import { callEtcd, MAX_CAS_ROUNDS, parseJson, queuedCallers, queueReadLimit, requestOf, storedRequest } from './etcd-records.js';

export interface EtcdStoreOptions {
  readonly endpoints: readonly string[];
  readonly keyPrefix: string;
  /** Upper bound on one etcd call; past it the caller gets a 503, not a hang. */
  readonly commandTimeoutMs: number;
  /** How long a lock's record outlives its lease (as in the other stores); etcd then deletes it. */
  readonly fenceGraceMs: number;
  readonly maxWaitersPerKey?: number;
  readonly clock?: Clock;
  readonly log?: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
}

/**
 * A lock record. `t` is set once the lease has been renewed or ended (until then the token is the
 * record's mod revision). A released lock keeps its record (owner "", ended) until `k`, like the
 * other stores keep a lock's last token for the fencing grace; etcd deletes it after that.
 */
interface LockRecord {
  readonly o: string;
  readonly e: number;
  readonly h: string | null;
  readonly t?: number;
  /** Keep until (ms): lease end + fencing grace. */
  readonly k?: number;
  /** The waiter this lease was handed to, so its instance recognises the hand-over. */
  readonly w?: string;
  /** The idempotency key the lease was granted with (immediate grants only; gone with the lease). */
  readonly i?: string;
  /** Lock-delay (ms): if this lease EXPIRES, the lock stays unavailable this long after `e`. */
  readonly d?: number;
  /** A release request on this lease; a grant or an end writes a record without it. */
  readonly r?: StoredReleaseRequest;
}

interface WaiterRecord extends WaiterRecordBase {
  /** The lock-delay the waiter asked for, carried into the lease it is handed. */
  readonly ld?: number;
}

/**
 * 3 s: the session lease every waiter record of this instance hangs on. If the instance dies its
 * keep-alives stop, etcd deletes its waiters within this, and they are never handed a lock nobody
 * would use (the Redis store's WAITER_LIVENESS_MS, enforced by etcd).
 */
const SESSION_TTL_S = 3;
/** Lock records and slots hang on shared leases, one per second of end time: etcd removes them once ended. */
const LEASE_BUCKET_MS = 1000;
/** Records outlive their lease end by this before etcd drops them (a dropped record is simply a free lock). */
const RECORD_SLACK_MS = 2000;

const newId = () => randomBase64url(9);
const tokenOf = (r: Observed<LockRecord>) => r.value.t ?? Number(r.kv.mod_revision);
const modOf = (r: Observed<unknown> | null) => (r ? r.kv.mod_revision : '0');

/**
 * The etcd store, for deployments that need consensus: every change is a Raft-replicated transaction,
 * so a grant acknowledged to a caller survives the loss of any minority of members.
 *
 * - Check-and-set: each change is one etcd transaction guarded by the lock record's mod revision; a
 *   change that lost a race is re-read and decided again.
 * - Fencing tokens: the etcd revision of the transaction that granted the lease. Revisions only go up
 *   across the whole cluster (Raft), whatever happens to individual keys.
 * - TTLs: a lease's end is written in the record; the record also hangs on an etcd lease so that etcd
 *   itself deletes it once it has ended (etcd leases count whole seconds, so they are for clean-up,
 *   not for the millisecond expiry the API promises).
 * - Waiting: waiters are keys under the lock's queue prefix, in create-revision order (FIFO across all
 *   instances), on this instance's session lease. Whoever frees a lock hands it to the first live
 *   waiter in the same transaction; the waiter's instance learns it from a watch on the lock record.
 *
 * Time: etcd has no clock an application can read, so lease ends are computed on the keyholder
 * instance's clock. Instances must keep their clocks in step (NTP); skew between instances eats into
 * the lease exactly as a client's own clock error does.
 */
export class EtcdStore implements LockStore {
  readonly kind = 'etcd';
  /** A lock set is one transaction over all its lock records. */
  readonly lockSets: LockSetStore = lockSetsOf(this);
  readonly permits: EtcdPermits;
  private readonly client: Etcd3;
  private readonly keys: EtcdKeys;
  private readonly timeoutMs: number;
  private readonly graceMs: number;
  private readonly maxWaitersPerKey: number;
  private readonly now: Clock;
  private readonly room: WaitRoom<AcquireOutcome>;
  private readonly heartbeat: NodeJS.Timeout;
  private readonly bucketLeases = new Map<number, Promise<string>>();
  private session: Lease | undefined;
  private readonly handOvers: HandOverWatches;
  private closed = false;

  constructor(options: EtcdStoreOptions) {
    this.keys = new EtcdKeys(options.keyPrefix);
    this.timeoutMs = options.commandTimeoutMs;
    this.graceMs = options.fenceGraceMs;
    this.maxWaitersPerKey = options.maxWaitersPerKey ?? 1000;
    this.now = options.clock ?? monotonicWallClock;
    this.client = new Etcd3({ hosts: [...options.endpoints], dialTimeout: Math.max(1000, options.commandTimeoutMs) });
    this.room = lockWaitRoom({
      confirm: (waiter) => this.confirm(waiter),
      cancel: (waiter) => this.cancel(waiter),
      release: (key, ownerToken) => this.release(key, ownerToken),
      visit: (key, waiters) => this.visit(key, waiters),
    });
    this.handOvers = new HandOverWatches(this.client, this.room);
    this.permits = new EtcdPermits({
      client: this.client,
      keys: this.keys,
      graceMs: this.graceMs,
      maxWaitersPerKey: this.maxWaitersPerKey,
      now: this.now,
      txn: (request) => this.txn(request),
      call: (run) => this.call(run),
      putOp: (key, value, endMs) => this.putOp(key, value, endMs),
      callOptions: () => this.callOptions(),
      sessionLease: () => this.sessionLease(),
    });
    this.heartbeat = startHeartbeat(() => {
      this.room.visitAll();
      this.permits.visitAll();
    });
  }

  async acquire({
    id: key,
    ownerToken,
    ttlMs,
    holder: label,
    waitMs = 0,
    signal,
    idempotencyKey,
    lockDelayMs = 0,
  }: AcquireInput): Promise<AcquireOutcome> {
    signal?.throwIfAborted();
    // "" is no label, as in the other stores (Redis stores none for it).
    const holder = label === '' ? null : label;
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const decidedAt = performance.now();
      const { lock, queued } = await this.readLock(key);
      const nowMs = this.now();
      if (lock && lock.value.o === ownerToken && lock.value.e > nowMs) {
        // Our own grant, from a call whose answer was lost and re-sent (the client retries on failover).
        return { acquired: true, fencingToken: tokenOf(lock), expiresAtMs: lock.value.e, decidedAt };
      }
      const live = lock !== null && lock.value.e > nowMs;
      const match =
        live && idempotencyKey !== undefined && lock.value.o !== '' ? compareIdempotencyKeys(lock.value.i, idempotencyKey) : 'other';
      if (match === 'reused') throw new IdempotencyKeyReusedError();
      if (live && match === 'replay') {
        // A retry of the acquire that made this lease (its answer was lost): the same grant, nothing changed.
        return {
          acquired: true,
          fencingToken: tokenOf(lock),
          expiresAtMs: lock.value.e,
          decidedAt,
          replayed: { ownerToken: lock.value.o, holder: lock.value.h },
        };
      }
      // An expired lease's lock-delay keeps the lock from everyone (a retry with its idempotency key too).
      const delayedUntil = live ? 0 : delayEnd(lock, nowMs);
      if (!live && delayedUntil === 0 && queued > 0) {
        // Free, but callers are queued: it is theirs, not this newcomer's.
        await this.handOver(key);
        continue;
      }
      if (!live && delayedUntil === 0) {
        const expiresAtMs = nowMs + ttlMs;
        // An empty label is no label, as in the other stores.
        const record: LockRecord = {
          o: ownerToken,
          e: expiresAtMs,
          h: holder || null,
          k: expiresAtMs + this.graceMs,
          ...(idempotencyKey !== undefined ? { i: idempotencyKey } : {}),
          ...(lockDelayMs > 0 ? { d: lockDelayMs } : {}),
        };
        const txn = await this.txn({
          compare: [{ key: this.keys.lock(key), target: 'Mod', result: 'Equal', mod_revision: modOf(lock) }],
          success: [await this.putOp(this.keys.lock(key), record, record.k as number)],
        });
        if (txn.succeeded) return { acquired: true, fencingToken: Number(txn.header.revision), expiresAtMs, decidedAt };
        continue;
      }
      const retryAfterMs = Math.max(1, Math.ceil((live ? lock.value.e : delayedUntil) - nowMs));
      if (waitMs <= 0) return { acquired: false, retryAfterMs };
      if (queued >= this.maxWaitersPerKey) throw new TooManyWaitersError('key', retryAfterMs);
      return this.enqueue({ id: key, ownerToken, ttlMs, holder, waitMs, signal, lockDelayMs }, retryAfterMs);
    }
    throw new StoreUnavailableError('too much contention on one lock to decide in time');
  }

  async renew(key: string, ownerToken: string, ttlMs: number): Promise<RenewOutcome> {
    const reply = await this.renewLease(key, ownerToken, ttlMs);
    if (!reply.held) return { renewed: false };
    return renewedFrom(reply);
  }

  /** One compare-and-set of the lock record: the live lease with `fencingToken` keeps the request. */
  async requestRelease(key: string, fencingToken: number, request: ReleaseRequestInput): Promise<ReleaseRequest | null> {
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const { lock } = await this.readLock(key);
      const nowMs = this.now();
      if (!lock || lock.value.e <= nowMs || tokenOf(lock) !== fencingToken) return null;
      const asked = { atMs: Math.floor(nowMs), by: request.by, reason: request.reason };
      // `t` pins the token (a put moves the mod revision it would otherwise be read from); `w` (a
      // hand-over's waiter) is dropped, as a renewal drops it, so this put is never read as a hand-over.
      const record: LockRecord = { ...lock.value, w: undefined, t: fencingToken, r: storedRequest(asked) };
      const keepUntil = record.k ?? record.e + this.graceMs;
      const txn = await this.txn({
        compare: [{ key: this.keys.lock(key), target: 'Mod', result: 'Equal', mod_revision: lock.kv.mod_revision }],
        success: [await this.putOp(this.keys.lock(key), record, keepUntil)],
      });
      if (txn.succeeded) return asked;
    }
    throw new StoreUnavailableError('too much contention on one lock to decide in time');
  }

  async release(key: string, ownerToken: string): Promise<boolean> {
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const { lock, queued } = await this.readLock(key);
      if (!lock || lock.value.o !== ownerToken || lock.value.e <= this.now()) return false;
      const txn = await this.txn({
        compare: [{ key: this.keys.lock(key), target: 'Mod', result: 'Equal', mod_revision: lock.kv.mod_revision }],
        success: [await this.endedOp(key, lock)],
      });
      if (!txn.succeeded) continue;
      if (queued > 0) await this.handOver(key).catch(() => undefined);
      return true;
    }
    throw new StoreUnavailableError('too much contention on one lock to decide in time');
  }

  async inspect(key: string): Promise<LockState | null> {
    const { lock, queued } = await this.readLock(key);
    const nowMs = this.now();
    if (!lock || lock.value.e <= nowMs) return null;
    const state = {
      holder: lock.value.h,
      waiters: queued,
      fencingToken: tokenOf(lock),
      expiresAtMs: lock.value.e,
      ttlRemainingMs: Math.max(0, Math.floor(lock.value.e - nowMs)),
    };
    return withReleaseRequest(state, lock.value.r && requestOf(lock.value.r));
  }

  async inspectIndexed(key: string): Promise<IndexedLockState> {
    const { lock, queued } = await this.readLock(key);
    const nowMs = this.now();
    if (!lock) return { state: null, lastFencingToken: 0 };
    const fencingToken = tokenOf(lock);
    if (lock.value.e <= nowMs || lock.value.o === '') {
      const delayedUntil = delayEnd(lock, nowMs);
      return { state: null, lastFencingToken: fencingToken, ...(delayedUntil > 0 ? { lockDelayUntilMs: delayedUntil } : {}) };
    }
    const state = {
      holder: lock.value.h,
      waiters: queued,
      fencingToken,
      expiresAtMs: lock.value.e,
      ttlRemainingMs: Math.max(0, Math.floor(lock.value.e - nowMs)),
    };
    return { state: withReleaseRequest(state, lock.value.r && requestOf(lock.value.r)), lastFencingToken: fencingToken };
  }

  /** etcd's own watch on the lock record: every put (grant, release, hand-over) or delete is a notice. */
  async watchChanges(key: string, onChange: () => void): Promise<() => void> {
    const watcher = await this.call(() => this.client.watch().key(this.keys.lock(key)).create());
    watcher.on('put', () => onChange());
    watcher.on('delete', () => onChange());
    // A watch that reconnects may have missed events: read again.
    watcher.on('connected', () => onChange());
    watcher.on('error', () => undefined);
    return () => void watcher.cancel().catch(() => undefined);
  }

  async forceRelease(key: string, fencingToken?: number): Promise<ForceReleaseOutcome> {
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const { lock, queued } = await this.readLock(key);
      if (!lock || lock.value.e <= this.now()) return { released: false };
      // The txn below compares the record's revision, so the lease checked here is the one deleted.
      if (fencingToken !== undefined && tokenOf(lock) !== fencingToken) return { released: false };
      const txn = await this.txn({
        compare: [{ key: this.keys.lock(key), target: 'Mod', result: 'Equal', mod_revision: lock.kv.mod_revision }],
        success: [await this.endedOp(key, lock)],
      });
      if (!txn.succeeded) continue;
      if (queued > 0) await this.handOver(key).catch(() => undefined);
      return { released: true, holder: lock.value.h, fencingToken: tokenOf(lock), evictedOwnerToken: lock.value.o };
    }
    throw new StoreUnavailableError('too much contention on one lock to decide in time');
  }

  /**
   * Grants every key or none: one transaction that writes every lock record, guarded by the mod
   * revision each was read at. Every key's token is that transaction's revision.
   */
  async acquireSet({ keys, ownerToken, ttlMs, holder: label, lockDelayMs = 0 }: LockSetInput): Promise<LockSetAcquireOutcome> {
    const holder = label === '' ? null : label;
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const decidedAt = performance.now();
      const read = await this.readLocks(keys);
      const nowMs = this.now();
      let busyKey: string | undefined;
      let freeAt = 0;
      read.forEach(({ lock, queued }, i) => {
        const live = lock !== null && lock.value.e > nowMs ? lock.value.e : 0;
        // Callers queued for a free key are about to get it: a set does not jump their queue.
        const until = live || delayEnd(lock, nowMs) || (queued > 0 ? nowMs + 1 : 0);
        if (until > freeAt) {
          freeAt = until;
          busyKey ??= keys[i];
        }
      });
      if (busyKey !== undefined) return { acquired: false, retryAfterMs: Math.max(1, Math.ceil(freeAt - nowMs)), busyKey };
      const expiresAtMs = Math.floor(nowMs) + ttlMs;
      const record: LockRecord = {
        o: ownerToken,
        e: expiresAtMs,
        h: holder,
        k: expiresAtMs + this.graceMs,
        ...(lockDelayMs > 0 ? { d: lockDelayMs } : {}),
      };
      const txn = await this.txn({
        compare: keys.map((key, i) => ({
          key: this.keys.lock(key),
          target: 'Mod' as const,
          result: 'Equal' as const,
          mod_revision: modOf(read[i]?.lock ?? null),
        })),
        success: await Promise.all(keys.map((key) => this.putOp(this.keys.lock(key), record, record.k as number))),
      });
      if (txn.succeeded) {
        const token = Number(txn.header.revision);
        return { acquired: true, fencingTokens: keys.map(() => token), expiresAtMs, decidedAt };
      }
    }
    throw new StoreUnavailableError('too much contention on a lock set to decide in time');
  }

  /** Extends every key's lease in one transaction, only if `ownerToken` holds every one. */
  async renewSet(keys: readonly string[], ownerToken: string, ttlMs: number): Promise<LockSetRenewOutcome> {
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const read = await this.readLocks(keys);
      const nowMs = this.now();
      const locks = read.map(({ lock }) => lock);
      if (!locks.every((lock) => lock !== null && lock.value.o === ownerToken && lock.value.e > nowMs)) return { renewed: false };
      const held = locks as Array<Observed<LockRecord>>;
      const expiresAtMs = Math.floor(nowMs) + ttlMs;
      const fencingTokens = held.map(tokenOf);
      const txn = await this.txn({
        compare: keys.map((key, i) => ({
          key: this.keys.lock(key),
          target: 'Mod' as const,
          result: 'Equal' as const,
          mod_revision: modOf(held[i] ?? null),
        })),
        success: await Promise.all(
          keys.map((key, i) => {
            const { value } = held[i] as Observed<LockRecord>;
            const record: LockRecord = { ...value, e: expiresAtMs, t: fencingTokens[i], k: expiresAtMs + this.graceMs };
            return this.putOp(this.keys.lock(key), record, record.k as number);
          }),
        ),
      });
      if (!txn.succeeded) continue;
      const asked = held.find((lock) => lock.value.r !== undefined)?.value.r;
      return withReleaseRequest({ renewed: true as const, fencingTokens, expiresAtMs }, asked && requestOf(asked));
    }
    throw new StoreUnavailableError('too much contention on a lock set to decide in time');
  }

  /** Frees, in one transaction, every key of the set `ownerToken` still holds; then hands each on to its queue. */
  async releaseSet(keys: readonly string[], ownerToken: string): Promise<boolean> {
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const read = await this.readLocks(keys);
      const nowMs = this.now();
      const mine = keys
        .map((key, i) => ({ key, lock: read[i]?.lock ?? null, queued: read[i]?.queued ?? 0 }))
        .filter(
          (x): x is { key: string; lock: Observed<LockRecord>; queued: number } =>
            x.lock !== null && x.lock.value.o === ownerToken && x.lock.value.e > nowMs,
        );
      if (mine.length === 0) return false;
      const txn = await this.txn({
        compare: mine.map(({ key, lock }) => ({
          key: this.keys.lock(key),
          target: 'Mod' as const,
          result: 'Equal' as const,
          mod_revision: lock.kv.mod_revision,
        })),
        success: await Promise.all(mine.map(({ key, lock }) => this.endedOp(key, lock))),
      });
      if (!txn.succeeded) continue;
      await Promise.all(mine.filter((x) => x.queued > 0).map((x) => this.handOver(x.key).catch(() => undefined)));
      return true;
    }
    throw new StoreUnavailableError('too much contention on a lock set to decide in time');
  }

  /** Lock records are read in key order from the cursor (the last id of the previous page). */
  async list({ prefix, limit, cursor }: ListQuery): Promise<ListPage> {
    // A cursor is the last id of a page listed with the same prefix: printable and starting with it.
    if (cursor !== undefined && !(/^[\x21-\x7e]+$/.test(cursor) && cursor.startsWith(prefix))) {
      throw new InvalidRequestError('cursor', 'must be a nextCursor returned by this route');
    }
    const range = this.keys.lockRange(prefix);
    const start = cursor !== undefined ? Buffer.concat([this.keys.lock(cursor), Buffer.from([0])]) : range.key;
    const res = await this.call(() => this.client.kv.range({ key: start, range_end: range.rangeEnd, limit }, this.callOptions()));
    const nowMs = this.now();
    const locks: LockListRow[] = [];
    let last: string | undefined;
    for (const kv of res.kvs) {
      const id = this.keys.lockIdOf(kv.key);
      if (id === null) continue;
      last = id;
      const value = parseJson<LockRecord>(kv.value);
      if (!value || value.e <= nowMs) continue;
      const state = await this.inspect(id);
      if (state) locks.push({ id, ...state });
    }
    return { locks, nextCursor: res.more && last !== undefined ? last : null };
  }

  /**
   * Optimistic: decide on a snapshot of the namespace's slots, then one transaction that writes only if
   * no reservation happened since (its version key unchanged) and otherwise reads the new snapshot, so
   * each round under contention is one round trip.
   */
  async reserveQuotaSlot(namespace: string, quotaSlotId: string, ttlMs: number, maxQuotaSlots: number): Promise<QuotaSlotOutcome> {
    const slots = this.keys.quotaSlots(namespace);
    const snapshot: IRequestOp[] = [
      { request_range: { key: this.keys.quotaSlotVersion(namespace) } },
      { request_range: { key: slots.key, range_end: slots.rangeEnd } },
    ];
    let read = await this.txn({ success: snapshot });
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const version = read.responses[0]?.response_range.kvs[0];
      const nowMs = this.now();
      const all = (read.responses[1]?.response_range.kvs ?? []).map((kv) => ({ kv, e: parseJson<{ e: number }>(kv.value)?.e ?? 0 }));
      const live = all.filter((x) => x.e > nowMs && this.keys.waiterIdOf(x.kv.key) !== quotaSlotId);
      if (live.length >= maxQuotaSlots) {
        return { reserved: false, retryAfterMs: Math.max(1, Math.ceil(Math.min(...live.map((x) => x.e)) - nowMs)) };
      }
      const expiresAtMs = nowMs + ttlMs;
      const txn = await this.txn({
        compare: [
          { key: this.keys.quotaSlotVersion(namespace), target: 'Mod', result: 'Equal', mod_revision: version?.mod_revision ?? '0' },
        ],
        success: [
          await this.putOp(this.keys.quotaSlot(namespace, quotaSlotId), { e: expiresAtMs }, expiresAtMs),
          { request_put: { key: this.keys.quotaSlotVersion(namespace), value: Buffer.from(String(nowMs)) } },
          // Ended slots are dropped here too, so a namespace's range stays short.
          ...all.filter((x) => x.e <= nowMs).map((x): IRequestOp => ({ request_delete_range: { key: x.kv.key } })),
        ],
        failure: snapshot,
      });
      if (txn.succeeded) return { reserved: true };
      read = txn;
    }
    throw new StoreUnavailableError('too much contention on one namespace quota to decide in time');
  }

  async extendQuotaSlot(namespace: string, quotaSlotId: string, expiresAtMs: number): Promise<void> {
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const key = this.keys.quotaSlot(namespace, quotaSlotId);
      const res = await this.call(() => this.client.kv.range({ key }, this.callOptions()));
      const kv = res.kvs[0];
      const current = kv ? parseJson<{ e: number }>(kv.value)?.e : undefined;
      if (!kv || current === undefined || current <= this.now() || current >= expiresAtMs) return;
      const txn = await this.txn({
        compare: [{ key, target: 'Mod', result: 'Equal', mod_revision: kv.mod_revision }],
        success: [await this.putOp(key, { e: expiresAtMs }, expiresAtMs)],
      });
      if (txn.succeeded) return;
    }
  }

  async freeQuotaSlot(namespace: string, quotaSlotId: string): Promise<void> {
    await this.call(() => this.client.kv.deleteRange({ key: this.keys.quotaSlot(namespace, quotaSlotId) }, this.callOptions()));
  }

  /** A linearizable read: it needs a leader and a quorum, which is what "the store can serve" means. */
  async ping(): Promise<void> {
    await this.call(() => this.client.kv.range({ key: this.keys.ping(), serializable: false }, this.callOptions()));
  }

  /** Deletes lock records past their grace and ended slots now (etcd's lease expiry does it too, to the second). */
  async sweep(): Promise<void> {
    const all = this.keys.all();
    const res = await this.call(() => this.client.kv.range({ key: all.key, range_end: all.rangeEnd }, this.callOptions()));
    const nowMs = this.now();
    for (const kv of res.kvs) {
      const value = parseJson<{ e?: number; k?: number }>(kv.value);
      const keepUntil = value?.k ?? value?.e;
      if (keepUntil === undefined || keepUntil > nowMs) continue;
      await this.txn({
        compare: [{ key: kv.key, target: 'Mod', result: 'Equal', mod_revision: kv.mod_revision }],
        success: [{ request_delete_range: { key: kv.key } }],
      });
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.heartbeat);
    await this.room.closeAll(new StoreUnavailableError('the store is closing'));
    await this.permits.closeAll(new StoreUnavailableError('the store is closing'));
    await this.handOvers.closeAll();
    if (this.session) await this.session.revoke().catch(() => undefined);
    this.client.close();
  }

  // ---- waiting ----

  private async enqueue(
    input: Required<Omit<AcquireInput, 'signal' | 'idempotencyKey' | 'maxHeldInNamespace'>> & Pick<AcquireInput, 'signal'>,
    retryAfterMs: number,
  ): Promise<AcquireOutcome> {
    const waiterId = newId();
    const waiter = this.room.register({ id: waiterId, key: input.id, ownerToken: input.ownerToken, ttlMs: input.ttlMs });
    try {
      // The waiter's place in the queue is its record's create revision: written first, before anything
      // else this instance has to set up, so callers queue in the order they arrived.
      const session = await this.sessionLease();
      const now = this.now();
      const record: WaiterRecord = {
        o: input.ownerToken,
        ttl: input.ttlMs,
        d: now + input.waitMs,
        h: input.holder || null,
        s: now,
        ...(input.lockDelayMs > 0 ? { ld: input.lockDelayMs } : {}),
      };
      await this.call(() =>
        this.client.kv.put(
          { key: this.keys.waiter(input.id, waiterId), value: Buffer.from(JSON.stringify(record)), lease: session },
          this.callOptions(),
        ),
      );
    } catch (err) {
      waiter.drop();
      throw err;
    }
    const outcome = waiter.wait(input.waitMs, retryAfterMs, input.signal);
    // A hand-over made before the watch is in place is found by this visit (and by every heartbeat);
    // the visit also covers a lock freed between the read and the queueing.
    void this.watchLock(input.id)
      .catch(() => undefined)
      .then(() => this.room.visitAll());
    return outcome;
  }

  /** The waiter was handed the lock: renewing restarts its full TTL from now and confirms it is still its. */
  private async confirm(waiter: Waiter): Promise<AcquireOutcome> {
    const decidedAt = performance.now();
    const reply = await this.renewLease(waiter.key, waiter.ownerToken, waiter.ttlMs);
    if (!reply.held) throw new StoreUnavailableError('the lock was handed over, but its lease ran out before it could be delivered');
    return { acquired: true, fencingToken: reply.fencingToken, expiresAtMs: reply.expiresAtMs, decidedAt };
  }

  private async cancel(waiter: Waiter): Promise<CancelReply> {
    const txn = await this.txn({
      success: [
        { request_delete_range: { key: this.keys.waiter(waiter.key, waiter.id) } },
        { request_range: { key: this.keys.lock(waiter.key) } },
      ],
    });
    const kv = txn.responses[1]?.response_range.kvs[0];
    const value = kv ? parseJson<LockRecord>(kv.value) : null;
    if (kv && value && value.o === waiter.ownerToken && value.e > this.now()) {
      return { held: true, fencingToken: tokenOf({ kv, value }), expiresAtMs: value.e };
    }
    // Time left on whoever holds it now: the caller's "not acquired" says when to try again.
    return { held: false, retryAfterMs: value && value.e > this.now() ? Math.ceil(value.e - this.now()) : 0 };
  }

  private async visit(key: string, waiters: readonly Waiter[]): Promise<{ remainingLeaseMs: number; grantedWaiterIds: string[] }> {
    await this.handOver(key);
    const { lock } = await this.readLock(key);
    const nowMs = this.now();
    if (!lock || lock.value.e <= nowMs) {
      // A lock-delay running: visit again when it ends, and hand the lock on then.
      const delayedUntil = delayEnd(lock, nowMs);
      return { remainingLeaseMs: delayedUntil > 0 ? Math.ceil(delayedUntil - nowMs) : 0, grantedWaiterIds: [] };
    }
    const mine = waiters.find((w) => w.ownerToken === lock.value.o);
    return { remainingLeaseMs: Math.ceil(lock.value.e - nowMs), grantedWaiterIds: mine ? [mine.id] : [] };
  }

  /**
   * If the lock is free (or its lease ended), gives it to the first live waiter in one transaction:
   * the lock record changes owner and the waiter record goes, guarded by both their revisions.
   */
  private async handOver(key: string): Promise<void> {
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const queue = this.keys.queue(key);
      const read = await this.txn({
        success: [
          { request_range: { key: this.keys.lock(key) } },
          { request_range: { key: queue.key, range_end: queue.rangeEnd, sort_target: 'Create', sort_order: 'Ascend', limit: 8 } },
        ],
      });
      const lockKv = read.responses[0]?.response_range.kvs[0];
      const lockValue = lockKv ? parseJson<LockRecord>(lockKv.value) : null;
      const nowMs = this.now();
      if (lockValue && lockValue.e > nowMs) return;
      if (lockKv && lockValue && delayEnd({ kv: lockKv, value: lockValue }, nowMs) > 0) return;
      const heads = read.responses[1]?.response_range.kvs ?? [];
      if (heads.length === 0) return;
      const ended: IRequestOp[] = [];
      let next: { kv: IKeyValue; value: WaiterRecord } | undefined;
      for (const kv of heads) {
        const value = parseJson<WaiterRecord>(kv.value);
        if (value && value.d > nowMs) {
          next = { kv, value };
          break;
        }
        ended.push({ request_delete_range: { key: kv.key } });
      }
      const compare = [
        { key: this.keys.lock(key), target: 'Mod' as const, result: 'Equal' as const, mod_revision: lockKv?.mod_revision ?? '0' },
      ];
      if (!next) {
        await this.txn({ compare, success: ended });
        continue;
      }
      const expiresAtMs = nowMs + next.value.ttl;
      const record: LockRecord = {
        o: next.value.o,
        e: expiresAtMs,
        h: next.value.h,
        w: this.keys.waiterIdOf(next.kv.key),
        k: expiresAtMs + this.graceMs,
        ...(next.value.ld !== undefined ? { d: next.value.ld } : {}),
      };
      const txn = await this.txn({
        compare: [...compare, { key: next.kv.key, target: 'Mod', result: 'Equal', mod_revision: next.kv.mod_revision }],
        success: [
          ...ended,
          await this.putOp(this.keys.lock(key), record, record.k as number),
          { request_delete_range: { key: next.kv.key } },
        ],
      });
      if (txn.succeeded) return;
    }
  }

  /** One watch per lock this instance has callers waiting for; a put naming one of them is its hand-over. */
  private async watchLock(key: string): Promise<void> {
    const handedTo = (value: Buffer) => {
      const w = parseJson<LockRecord>(value)?.w;
      return w === undefined ? [] : [w];
    };
    await this.call(() => this.handOvers.open(key, this.keys.lock(key), handedTo));
  }

  /** This instance's session lease (kept alive by the client); a lost one is replaced for new waiters. */
  private async sessionLease(): Promise<string> {
    if (!this.session || this.session.revoked()) {
      const lease = this.client.lease(SESSION_TTL_S);
      lease.on('lost', () => {
        if (this.session === lease) this.session = undefined;
      });
      this.session = lease;
    }
    const lease = this.session;
    return this.call(() => lease.grant());
  }

  // ---- plumbing ----

  private async renewLease(key: string, ownerToken: string, ttlMs: number): Promise<LeaseReply> {
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const { lock } = await this.readLock(key);
      const nowMs = this.now();
      if (!lock || lock.value.o !== ownerToken || lock.value.e <= nowMs) return { held: false };
      const fencingToken = tokenOf(lock);
      const expiresAtMs = nowMs + ttlMs;
      const record: LockRecord = {
        o: ownerToken,
        e: expiresAtMs,
        h: lock.value.h,
        t: fencingToken,
        k: expiresAtMs + this.graceMs,
        // A renewal keeps the lease's idempotency key: a retried acquire still finds the same lease.
        ...(lock.value.i !== undefined ? { i: lock.value.i } : {}),
        ...(lock.value.d !== undefined ? { d: lock.value.d } : {}),
        ...(lock.value.r !== undefined ? { r: lock.value.r } : {}),
      };
      const txn = await this.txn({
        compare: [{ key: this.keys.lock(key), target: 'Mod', result: 'Equal', mod_revision: lock.kv.mod_revision }],
        success: [await this.putOp(this.keys.lock(key), record, record.k as number)],
      });
      if (!txn.succeeded) continue;
      return withReleaseRequest({ held: true as const, fencingToken, expiresAtMs }, lock.value.r && requestOf(lock.value.r));
    }
    throw new StoreUnavailableError('too much contention on one lock to decide in time');
  }

  /**
   * The queue in its order (the records' create revisions), skipping waiters whose wait ran out. A
   * record without its arrival time (written before records carried it) shows its deadline's start
   * as unknown: 0.
   */
  async queue(key: string, limit: number): Promise<QueuedCaller[]> {
    const range = this.keys.queue(key);
    const res = await this.call(() =>
      this.client.kv.range(
        { key: range.key, range_end: range.rangeEnd, sort_target: 'Create', sort_order: 'Ascend', limit: queueReadLimit(limit) },
        this.callOptions(),
      ),
    );
    return queuedCallers(res.kvs, this.now(), limit);
  }

  /** The lock record and the number of queued waiters, read together at one revision. */
  private async readLock(key: string): Promise<{ lock: Observed<LockRecord> | null; queued: number }> {
    const queue = this.keys.queue(key);
    const read = await this.txn({
      success: [
        { request_range: { key: this.keys.lock(key) } },
        { request_range: { key: queue.key, range_end: queue.rangeEnd, count_only: true } },
      ],
    });
    const kv = read.responses[0]?.response_range.kvs[0];
    const value = kv ? parseJson<LockRecord>(kv.value) : null;
    return { lock: kv && value ? { kv, value } : null, queued: Number(read.responses[1]?.response_range.count ?? 0) };
  }

  /** Several locks' records and queue counts, read together at one revision. */
  private async readLocks(keys: readonly string[]): Promise<Array<{ lock: Observed<LockRecord> | null; queued: number }>> {
    const read = await this.txn({
      success: keys.flatMap((key): IRequestOp[] => {
        const queue = this.keys.queue(key);
        return [
          { request_range: { key: this.keys.lock(key) } },
          { request_range: { key: queue.key, range_end: queue.rangeEnd, count_only: true } },
        ];
      }),
    });
    return keys.map((_, i) => {
      const kv = read.responses[2 * i]?.response_range.kvs[0];
      const value = kv ? parseJson<LockRecord>(kv.value) : null;
      return { lock: kv && value ? { kv, value } : null, queued: Number(read.responses[2 * i + 1]?.response_range.count ?? 0) };
    });
  }

  /** The record of a lock whose lease was ended early: no owner, ended now, kept for the grace period. */
  private async endedOp(key: string, lock: Observed<LockRecord>): Promise<IRequestOp> {
    const nowMs = this.now();
    const record: LockRecord = { o: '', e: nowMs, h: null, t: tokenOf(lock), k: nowMs + this.graceMs };
    return this.putOp(this.keys.lock(key), record, record.k as number);
  }

  private async putOp(key: Buffer, value: object, endMs: number): Promise<IRequestOp> {
    return { request_put: { key, value: Buffer.from(JSON.stringify(value)), lease: await this.bucketLease(endMs) } };
  }

  /** A shared lease that ends a little after `endMs` (whole seconds, etcd's unit), granted once per bucket. */
  private bucketLease(endMs: number): Promise<string> {
    const bucket = Math.ceil((endMs + RECORD_SLACK_MS) / LEASE_BUCKET_MS);
    let lease = this.bucketLeases.get(bucket);
    if (!lease) {
      const ttlS = Math.max(1, Math.ceil((bucket * LEASE_BUCKET_MS - this.now()) / 1000));
      lease = this.call(() => this.client.leaseClient.leaseGrant({ TTL: ttlS }, this.callOptions())).then((r) => r.ID);
      this.bucketLeases.set(bucket, lease);
      lease.catch(() => this.bucketLeases.delete(bucket));
      // Forget buckets once they have ended.
      setTimeout(() => this.bucketLeases.delete(bucket), Math.max(0, bucket * LEASE_BUCKET_MS - this.now())).unref();
    }
    return lease;
  }

  private txn(request: ITxnRequest): Promise<ITxnResponse> {
    return this.call(() => this.client.kv.txn(request, this.callOptions()));
  }

  private callOptions() {
    return { deadline: Date.now() + this.timeoutMs };
  }

  private call<T>(run: () => Promise<T>): Promise<T> {
    return callEtcd(this.closed, 'etcd', run);
  }
}

/** When an EXPIRED (not released) lease's lock-delay ends, or 0 when none runs now. */
function delayEnd(lock: Observed<LockRecord> | null, nowMs: number): number {
  if (!lock || lock.value.o === '' || !lock.value.d || lock.value.e > nowMs) return 0;
  const end = lock.value.e + lock.value.d;
  return end > nowMs ? end : 0;
}
