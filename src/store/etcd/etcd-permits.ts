/**
 * The etcd store's semaphores and read/write locks (permit-store.ts: a weighted FIFO semaphore).
 *
 * Key layout (names built in etcd-keys.ts):
 *
 *   <prefix>pool/<kind>/<id>               the key's pool: ONE JSON record (PoolRecord) holding its
 *                                          capacity, its watch-index base and every lease not yet
 *                                          dropped. Every change is one transaction guarded by this
 *                                          record's mod revision, so "does the weight fit" and "take
 *                                          it" are one atomic step. It hangs on a shared etcd lease
 *                                          that ends after its last lease's end plus the fencing grace.
 *   <prefix>pqueue/<kind>/<id>#<waiterId>  a queued caller (PermitWaiterRecord) on this instance's
 *                                          session lease: FIFO order is the create revision, and a
 *                                          dead instance's waiters vanish with its session.
 *
 * Fencing tokens: a change read at revision H commits at a revision above H, and the next change of
 * the pool reads at that revision or later. The i-th lease granted by a change gets
 * (H + 1) * INDEX_SCALE + i: strictly above every token the pool gave before, also after the pool was
 * forgotten or deleted (revisions only go up across the cluster, whatever happens to keys).
 *
 * Watch index: the record's `x` ((H + 1) * INDEX_SCALE of its last grant, release or eviction, not of
 * a renewal) plus the leases in it that have ended: an expiry raises it with nothing written, and the
 * next change (which drops the ended leases) starts from a higher base again. Ended leases stay in the
 * record until a change drops them or the whole record goes, so the index never steps back.
 *
 * One record per pool keeps each step a single compare-and-swap; its cost is the record's size, about
 * 80 bytes per live lease plus its holder label (etcd's default request limit of 1.5 MiB holds about
 * 19,000 unlabelled leases, 7,500 with 128-character labels; past it etcd refuses the put, and the
 * grant answers 503 with nothing taken).
 */
import { renewedFrom } from '../shared/lease-replies.js';
import { withReleaseRequest } from '../../domain/permit-store.js';
import { performance } from 'node:perf_hooks';
import type { Etcd3, IKeyValue, IRequestOp, ITxnRequest, ITxnResponse } from 'etcd3';
import { InvalidRequestError, StoreUnavailableError, TooManyWaitersError } from '../../domain/errors.js';
import {
  MAX_HOLDERS_SHOWN,
  type EvictedPermit,
  type IndexedPermitState,
  type PermitAcquireInput,
  type PermitAcquireOutcome,
  type PermitKind,
  type PermitListPage,
  type PermitListQuery,
  type PermitState,
  type PermitStore,
  type QueuedCaller,
  type ReleaseRequest,
  type ReleaseRequestInput,
} from '../../domain/permit-store.js';
import { randomBase64url } from '../../domain/random.js';
import type { Clock } from '../shared/clock.js';
import type { CancelReply, LeaseReply } from '../shared/lease-replies.js';
import { WaitRoom, type Waiter } from '../shared/wait-room.js';
import type { EtcdKeys } from './etcd-keys.js';
import { HandOverWatches } from './etcd-watches.js';
import type { Observed, StoredReleaseRequest, WaiterRecordBase } from './etcd-records.js';
import { MAX_CAS_ROUNDS, parseJson, queuedCallers, queueReadLimit, requestOf, storedRequest } from './etcd-records.js';

/** What the permits use of the etcd store they belong to: its client, keys and plumbing. */
export interface EtcdPermitsDeps {
  readonly client: Etcd3;
  readonly keys: EtcdKeys;
  readonly graceMs: number;
  readonly maxWaitersPerKey: number;
  readonly now: Clock;
  txn(request: ITxnRequest): Promise<ITxnResponse>;
  call<T>(run: () => Promise<T>): Promise<T>;
  /** A put of `value` on a shared etcd lease that ends a little after `endMs`. */
  putOp(key: Buffer, value: object, endMs: number): Promise<IRequestOp>;
  /** Per-call options: the deadline of one etcd call. */
  callOptions(): { deadline: number };
  /** This instance's session lease id (waiters hang on it). */
  sessionLease(): Promise<string>;
}

interface PermitLeaseRecord {
  /** Owner token. */
  readonly o: string;
  /** Weight. */
  readonly w: number;
  /** End (Unix ms, this store's clock). */
  readonly e: number;
  readonly h: string | null;
  /** Fencing token. */
  readonly t: number;
  /** A release request on this lease (atMs, by, reason); goes with the lease. */
  readonly r?: StoredReleaseRequest;
}

interface PoolRecord {
  /** Capacity the live leases were granted under. */
  readonly c: number;
  /** Watch-index base of the last change (see the header). */
  readonly x: number;
  /** Keep until (ms): the latest lease end plus the fencing grace. */
  readonly k: number;
  /** Leases in grant order, live or ended but not yet dropped. */
  readonly l: readonly PermitLeaseRecord[];
  /** The waiters this change handed a lease to, so their instances recognise the hand-over. */
  readonly g?: readonly string[];
}

interface PermitWaiterRecord extends WaiterRecordBase {
  readonly w: number;
  /** The capacity the waiter asked with (the pool's, once it has live leases). */
  readonly c: number;
}

/**
 * 2^15: room per revision for the tokens of one change and for the ended leases counted into the
 * index. A pool's leases each weigh at least 1 and never exceed its capacity (at most 10,000), so
 * neither can reach it; revisions stay below 2^53 / 2^15 (2.7e11 writes) as safe integers.
 */
const INDEX_SCALE = 32_768;
/** Queue heads read per hand-over: more than enough to fill the room a release frees in one step. */
const HEADS_READ = 64;
const PRINTABLE_ID = /^[\x21-\x7e]+$/;

export class EtcdPermits implements PermitStore {
  private readonly room: WaitRoom<PermitAcquireOutcome>;
  private readonly handOvers: HandOverWatches;

  constructor(private readonly deps: EtcdPermitsDeps) {
    this.room = new WaitRoom<PermitAcquireOutcome>({
      confirm: (waiter) => this.confirm(waiter),
      notGranted: (retryAfterMs) => ({ acquired: false, reason: 'full', retryAfterMs }),
      cancel: (waiter) => this.cancel(waiter),
      release: (roomKey, ownerToken) => {
        const { kind, key } = splitRoomKey(roomKey);
        return this.releasePermit(kind, key, ownerToken);
      },
      visit: (roomKey, waiters) => this.visit(roomKey, waiters),
    });
    this.handOvers = new HandOverWatches(deps.client, this.room);
  }

  visitAll(): void {
    this.room.visitAll();
  }

  async closeAll(reason: unknown): Promise<void> {
    await this.room.closeAll(reason);
    await this.handOvers.closeAll();
  }

  async acquirePermit(input: PermitAcquireInput): Promise<PermitAcquireOutcome> {
    const { kind, key, ownerToken, ttlMs, weight, capacity, waitMs = 0, signal } = input;
    const holder = input.holder === '' ? null : input.holder;
    signal?.throwIfAborted();
    let handedOver = false;
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const decidedAt = performance.now();
      const { pool, queued, revision } = await this.read(kind, key);
      const nowMs = this.deps.now();
      const live = liveLeases(pool, nowMs);
      if (pool && live.length > 0 && pool.value.c !== capacity) {
        return { acquired: false, reason: 'mismatch', capacity: pool.value.c, retryAfterMs: untilLast(live, nowMs) };
      }
      if (queued > 0 && !handedOver && used(live) + weight <= capacity) {
        // Room, but callers are queued: it is theirs first (a lease may have ended with nobody to hand it on).
        await this.handOver(kind, key);
        handedOver = true;
        continue;
      }
      if (queued === 0 && used(live) + weight <= capacity) {
        const base = (revision + 1) * INDEX_SCALE;
        const lease: PermitLeaseRecord = { o: ownerToken, w: weight, e: Math.floor(nowMs) + ttlMs, h: holder, t: base };
        const txn = await this.deps.txn({
          compare: [this.unchanged(kind, key, pool)],
          success: [await this.putPool(kind, key, { c: capacity, x: base, l: [...live, lease] })],
        });
        if (txn.succeeded) return { acquired: true, fencingToken: lease.t, expiresAtMs: lease.e, decidedAt };
        continue;
      }
      const retryAfterMs = untilFirst(live, nowMs);
      if (waitMs <= 0) return { acquired: false, reason: 'full', retryAfterMs };
      if (queued >= this.deps.maxWaitersPerKey) throw new TooManyWaitersError('key', retryAfterMs);
      return this.enqueue(input, holder, retryAfterMs);
    }
    throw new StoreUnavailableError('too much contention on one key to decide in time');
  }

  async renewPermit(kind: PermitKind, key: string, ownerToken: string, ttlMs: number) {
    const reply = await this.renewLease(kind, key, ownerToken, ttlMs);
    if (!reply.held) return { renewed: false as const };
    return renewedFrom(reply);
  }

  /** The request is written into the lease's entry of the pool record: it goes wherever the lease goes. */
  async requestPermitRelease(
    kind: PermitKind,
    key: string,
    fencingToken: number,
    request: ReleaseRequestInput,
  ): Promise<ReleaseRequest | null> {
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const { pool } = await this.read(kind, key);
      const nowMs = this.deps.now();
      const lease = liveLeases(pool, nowMs).find((l) => l.t === fencingToken);
      if (!pool || !lease) return null;
      const asked = { atMs: Math.floor(nowMs), by: request.by, reason: request.reason };
      // Not a change a watcher counts (as a renewal): the index base stays.
      const l = pool.value.l.map((x) => (x.o === lease.o ? { ...x, r: storedRequest(asked) } : x));
      const txn = await this.deps.txn({
        compare: [this.unchanged(kind, key, pool)],
        success: [await this.putPool(kind, key, { c: pool.value.c, x: pool.value.x, l }, pool.value.k)],
      });
      if (txn.succeeded) return asked;
    }
    throw new StoreUnavailableError('too much contention on one key to decide in time');
  }

  async releasePermit(kind: PermitKind, key: string, ownerToken: string): Promise<boolean> {
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const { pool, queued, revision } = await this.read(kind, key);
      const nowMs = this.deps.now();
      const live = liveLeases(pool, nowMs);
      if (!pool || !live.some((l) => l.o === ownerToken)) return false;
      const kept = live.filter((l) => l.o !== ownerToken);
      if (await this.dropLeases(kind, key, { pool, queued, revision }, kept)) return true;
    }
    throw new StoreUnavailableError('too much contention on one key to decide in time');
  }

  async inspectPermits(kind: PermitKind, key: string): Promise<PermitState | null> {
    return (await this.inspectPermitsIndexed(kind, key)).state;
  }

  async inspectPermitsIndexed(kind: PermitKind, key: string): Promise<IndexedPermitState> {
    const { pool, queued } = await this.read(kind, key);
    if (!pool) return { state: null, index: 0 };
    const nowMs = this.deps.now();
    return { state: stateOf(pool.value, queued, nowMs), index: indexOf(pool.value, nowMs) };
  }

  /** etcd's own watch on the pool record: every grant, release, eviction or hand-over is a put. */
  async watchPermitChanges(kind: PermitKind, key: string, onChange: () => void): Promise<() => void> {
    const watcher = await this.deps.call(() => this.deps.client.watch().key(this.deps.keys.pool(kind, key)).create());
    watcher.on('put', () => onChange());
    watcher.on('delete', () => onChange());
    // A watch that reconnects may have missed events: read again.
    watcher.on('connected', () => onChange());
    watcher.on('error', () => undefined);
    return () => void watcher.cancel().catch(() => undefined);
  }

  async forceReleasePermits(kind: PermitKind, key: string, fencingToken?: number): Promise<EvictedPermit[]> {
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const { pool, queued, revision } = await this.read(kind, key);
      // With a fencing token, only that lease goes (the one an administrator saw); none live: nothing changes.
      const evicted = liveLeases(pool, this.deps.now()).filter((l) => fencingToken === undefined || l.t === fencingToken);
      if (!pool || evicted.length === 0) return [];
      const gone = new Set(evicted.map((l) => l.o));
      const kept = pool.value.l.filter((l) => !gone.has(l.o));
      if (await this.dropLeases(kind, key, { pool, queued, revision }, kept)) {
        return evicted.map((l) => ({ holder: l.h, fencingToken: l.t, ownerToken: l.o }));
      }
    }
    throw new StoreUnavailableError('too much contention on one key to decide in time');
  }

  /** Live queued callers in queue order (create revision), at most `limit`; never their owner tokens. */
  async permitQueue(kind: PermitKind, key: string, limit: number): Promise<QueuedCaller[]> {
    const range = this.deps.keys.permitQueue(kind, key);
    const res = await this.deps.call(() =>
      this.deps.client.kv.range(
        { key: range.key, range_end: range.rangeEnd, sort_target: 'Create', sort_order: 'Ascend', limit: queueReadLimit(limit) },
        this.deps.callOptions(),
      ),
    );
    return queuedCallers(res.kvs, this.deps.now(), limit);
  }

  /** Pool records are read in key order from the cursor; pools with no live lease are left out. */
  async listPermits(kind: PermitKind, { prefix, limit, cursor }: PermitListQuery): Promise<PermitListPage> {
    if (cursor !== undefined && !(PRINTABLE_ID.test(cursor) && cursor.startsWith(prefix))) {
      throw new InvalidRequestError('cursor', 'must be a nextCursor returned by this route');
    }
    const keys = this.deps.keys;
    const range = keys.poolRange(kind, prefix);
    const start = cursor !== undefined ? Buffer.concat([keys.pool(kind, cursor), Buffer.from([0])]) : range.key;
    const res = await this.deps.call(() =>
      this.deps.client.kv.range({ key: start, range_end: range.rangeEnd, limit }, this.deps.callOptions()),
    );
    const nowMs = this.deps.now();
    const entries: Array<{ id: string; state: PermitState }> = [];
    let last: string | undefined;
    for (const kv of res.kvs) {
      const id = keys.poolIdOf(kind, kv.key);
      if (id === null) continue;
      last = id;
      const value = parseJson<PoolRecord>(kv.value);
      if (!value || liveLeases({ kv, value }, nowMs).length === 0) continue;
      // The queue count is read with the pool, at one revision.
      const state = await this.inspectPermits(kind, id);
      if (state) entries.push({ id, state });
    }
    return { entries, nextCursor: res.more && last !== undefined ? last : null };
  }

  // ---- waiting ----

  private async enqueue(input: PermitAcquireInput, holder: string | null, retryAfterMs: number): Promise<PermitAcquireOutcome> {
    const { kind, key, ownerToken, ttlMs, waitMs = 0, signal } = input;
    const waiterId = randomBase64url(9);
    const waiter = this.room.register({ id: waiterId, key: roomKey(kind, key), ownerToken, ttlMs });
    try {
      // Written first: the record's create revision is the caller's place in the queue.
      const session = await this.deps.sessionLease();
      const now = this.deps.now();
      const record: PermitWaiterRecord = {
        o: ownerToken,
        ttl: ttlMs,
        d: now + waitMs,
        h: holder,
        w: input.weight,
        c: input.capacity,
        s: now,
      };
      await this.deps.call(() =>
        this.deps.client.kv.put(
          { key: this.deps.keys.permitWaiter(kind, key, waiterId), value: Buffer.from(JSON.stringify(record)), lease: session },
          this.deps.callOptions(),
        ),
      );
    } catch (err) {
      waiter.drop();
      throw err;
    }
    const outcome = waiter.wait(waitMs, retryAfterMs, signal);
    // A hand-over made before the watch is in place is found by this visit (and by every heartbeat);
    // the visit also covers room freed between the read and the queueing.
    void this.watchPool(kind, key)
      .catch(() => undefined)
      .then(() => this.room.visitAll());
    return outcome;
  }

  /** The waiter was handed a lease: renewing restarts its full TTL from now and confirms it is still its. */
  private async confirm(waiter: Waiter): Promise<PermitAcquireOutcome> {
    const decidedAt = performance.now();
    const { kind, key } = splitRoomKey(waiter.key);
    const reply = await this.renewLease(kind, key, waiter.ownerToken, waiter.ttlMs);
    if (!reply.held) throw new StoreUnavailableError('a permit was handed over, but its lease ran out before it could be delivered');
    return { acquired: true, fencingToken: reply.fencingToken, expiresAtMs: reply.expiresAtMs, decidedAt };
  }

  private async cancel(waiter: Waiter): Promise<CancelReply> {
    const { kind, key } = splitRoomKey(waiter.key);
    const txn = await this.deps.txn({
      success: [
        { request_delete_range: { key: this.deps.keys.permitWaiter(kind, key, waiter.id) } },
        { request_range: { key: this.deps.keys.pool(kind, key) } },
      ],
    });
    const kv = txn.responses[1]?.response_range.kvs[0];
    const value = kv ? parseJson<PoolRecord>(kv.value) : null;
    const nowMs = this.deps.now();
    const live = kv && value ? liveLeases({ kv, value }, nowMs) : [];
    const mine = live.find((l) => l.o === waiter.ownerToken);
    if (mine) return { held: true, fencingToken: mine.t, expiresAtMs: mine.e };
    // A waiter leaving from the head may let those behind it in (readers behind a writer who gave up).
    void this.handOver(kind, key).catch(() => undefined);
    return { held: false, retryAfterMs: live.length > 0 ? untilFirst(live, nowMs) : 0 };
  }

  private async visit(roomKeyText: string, waiters: readonly Waiter[]): Promise<{ remainingLeaseMs: number; grantedWaiterIds: string[] }> {
    const { kind, key } = splitRoomKey(roomKeyText);
    await this.handOver(kind, key);
    const { pool } = await this.read(kind, key);
    const nowMs = this.deps.now();
    const live = liveLeases(pool, nowMs);
    if (live.length === 0) return { remainingLeaseMs: 0, grantedWaiterIds: [] };
    const owners = new Set(live.map((l) => l.o));
    return {
      remainingLeaseMs: untilFirst(live, nowMs),
      grantedWaiterIds: waiters.filter((w) => owners.has(w.ownerToken)).map((w) => w.id),
    };
  }

  /**
   * Grants the queue's heads, in order, for as long as the head's weight fits (no overtaking), in one
   * transaction: the pool gains their leases and their waiter records go, guarded by all their
   * revisions. Waiters whose wait has ended are dropped on the way.
   */
  private async handOver(kind: PermitKind, key: string): Promise<void> {
    const keys = this.deps.keys;
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const queue = keys.permitQueue(kind, key);
      const read = await this.deps.txn({
        success: [
          { request_range: { key: keys.pool(kind, key) } },
          { request_range: { key: queue.key, range_end: queue.rangeEnd, sort_target: 'Create', sort_order: 'Ascend', limit: HEADS_READ } },
        ],
      });
      const revision = Number(read.header.revision);
      const poolKv = read.responses[0]?.response_range.kvs[0];
      const poolValue = poolKv ? parseJson<PoolRecord>(poolKv.value) : null;
      const pool = poolKv && poolValue ? { kv: poolKv, value: poolValue } : null;
      const heads = read.responses[1]?.response_range.kvs ?? [];
      if (heads.length === 0) return;
      const nowMs = this.deps.now();
      const live = liveLeases(pool, nowMs);
      const base = (revision + 1) * INDEX_SCALE;
      const leases = [...live];
      const ended: IRequestOp[] = [];
      const taken: Array<{ kv: IKeyValue; id: string }> = [];
      let capacity = live.length > 0 && pool ? pool.value.c : undefined;
      for (const kv of heads) {
        const value = parseJson<PermitWaiterRecord>(kv.value);
        if (!value || value.d <= nowMs) {
          ended.push({ request_delete_range: { key: kv.key } });
          continue;
        }
        capacity ??= value.c;
        if (used(leases) + value.w > capacity) break;
        leases.push({ o: value.o, w: value.w, e: Math.floor(nowMs) + value.ttl, h: value.h, t: base + taken.length });
        taken.push({ kv, id: keys.waiterIdOf(kv.key) });
      }
      if (taken.length === 0) {
        if (ended.length > 0) await this.deps.txn({ success: ended });
        if (ended.length === heads.length && heads.length === HEADS_READ) continue;
        return;
      }
      const txn = await this.deps.txn({
        compare: [
          this.unchanged(kind, key, pool),
          ...taken.map(({ kv }) => ({ key: kv.key, target: 'Mod' as const, result: 'Equal' as const, mod_revision: kv.mod_revision })),
        ],
        success: [
          ...ended,
          await this.putPool(kind, key, { c: capacity as number, x: base, l: leases, g: taken.map((t) => t.id) }, pool?.value.k),
          ...taken.map(({ kv }): IRequestOp => ({ request_delete_range: { key: kv.key } })),
        ],
      });
      if (txn.succeeded) return;
    }
  }

  /** One watch per pool this instance has callers waiting for; a put naming one of them is its hand-over. */
  private async watchPool(kind: PermitKind, key: string): Promise<void> {
    const handedTo = (value: Buffer) => parseJson<PoolRecord>(value)?.g ?? [];
    await this.deps.call(() => this.handOvers.open(roomKey(kind, key), this.deps.keys.pool(kind, key), handedTo));
  }

  // ---- plumbing ----

  private async renewLease(kind: PermitKind, key: string, ownerToken: string, ttlMs: number): Promise<LeaseReply> {
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const { pool } = await this.read(kind, key);
      const nowMs = this.deps.now();
      const lease = liveLeases(pool, nowMs).find((l) => l.o === ownerToken);
      if (!pool || !lease) return { held: false };
      const expiresAtMs = Math.floor(nowMs) + ttlMs;
      // A renewal is no change a watcher sees: the index base stays, and ended leases stay counted.
      const l = pool.value.l.map((x) => (x.o === ownerToken ? { ...x, e: expiresAtMs } : x));
      const txn = await this.deps.txn({
        compare: [this.unchanged(kind, key, pool)],
        success: [await this.putPool(kind, key, { c: pool.value.c, x: pool.value.x, l }, pool.value.k)],
      });
      if (!txn.succeeded) continue;
      return withReleaseRequest({ held: true as const, fencingToken: lease.t, expiresAtMs }, lease.r && requestOf(lease.r));
    }
    throw new StoreUnavailableError('too much contention on one key to decide in time');
  }

  /** The pool record and the number of queued callers, read together, and the revision read at. */
  private async read(kind: PermitKind, key: string): Promise<{ pool: Observed<PoolRecord> | null; queued: number; revision: number }> {
    const queue = this.deps.keys.permitQueue(kind, key);
    const read = await this.deps.txn({
      success: [
        { request_range: { key: this.deps.keys.pool(kind, key) } },
        { request_range: { key: queue.key, range_end: queue.rangeEnd, count_only: true } },
      ],
    });
    const kv = read.responses[0]?.response_range.kvs[0];
    const value = kv ? parseJson<PoolRecord>(kv.value) : null;
    return {
      pool: kv && value ? { kv, value } : null,
      queued: Number(read.responses[1]?.response_range.count ?? 0),
      revision: Number(read.header.revision),
    };
  }

  /**
   * A release or an eviction: writes the pool read at `read.revision` with only the leases `kept` (a
   * change a watcher counts: the index base moves), then hands the room freed to the callers queued.
   * False when the pool changed since it was read (nothing was written).
   */
  private async dropLeases(
    kind: PermitKind,
    key: string,
    read: { pool: Observed<PoolRecord>; queued: number; revision: number },
    kept: readonly PermitLeaseRecord[],
  ): Promise<boolean> {
    const { pool, queued, revision } = read;
    const next = { c: pool.value.c, x: (revision + 1) * INDEX_SCALE, l: kept };
    const txn = await this.deps.txn({
      compare: [this.unchanged(kind, key, pool)],
      success: [await this.putPool(kind, key, next, pool.value.k)],
    });
    if (!txn.succeeded) return false;
    if (queued > 0) await this.handOver(kind, key).catch(() => undefined);
    return true;
  }

  /** The compare of a change: the pool record is as it was read (absent: still absent). */
  private unchanged(kind: PermitKind, key: string, pool: Observed<PoolRecord> | null) {
    return {
      key: this.deps.keys.pool(kind, key),
      target: 'Mod' as const,
      result: 'Equal' as const,
      mod_revision: pool ? pool.kv.mod_revision : '0',
    };
  }

  /** The put of a pool record, kept until its latest lease end plus the grace (never earlier than `keptUntil`). */
  private putPool(kind: PermitKind, key: string, record: Omit<PoolRecord, 'k'>, keptUntil = 0): Promise<IRequestOp> {
    const k = Math.max(keptUntil, ...record.l.map((l) => l.e + this.deps.graceMs));
    return this.deps.putOp(this.deps.keys.pool(kind, key), { ...record, k }, k);
  }
}

function roomKey(kind: PermitKind, key: string): string {
  return `${kind} ${key}`;
}

function splitRoomKey(text: string): { kind: PermitKind; key: string } {
  const at = text.indexOf(' ');
  return { kind: text.slice(0, at) as PermitKind, key: text.slice(at + 1) };
}

function liveLeases(pool: Observed<PoolRecord> | null, nowMs: number): PermitLeaseRecord[] {
  return pool ? pool.value.l.filter((l) => l.e > nowMs) : [];
}

function used(leases: readonly PermitLeaseRecord[]): number {
  let sum = 0;
  for (const lease of leases) sum += lease.w;
  return sum;
}

/** Time left on the earliest-ending live lease (when room may free up), at least 1. */
function untilFirst(live: readonly PermitLeaseRecord[], nowMs: number): number {
  return live.length === 0 ? 1 : Math.max(1, Math.ceil(Math.min(...live.map((l) => l.e)) - nowMs));
}

/** Time left on the latest-ending live lease (when the pool is empty), at least 1. */
function untilLast(live: readonly PermitLeaseRecord[], nowMs: number): number {
  return live.length === 0 ? 1 : Math.max(1, Math.ceil(Math.max(...live.map((l) => l.e)) - nowMs));
}

function indexOf(pool: PoolRecord, nowMs: number): number {
  let ended = 0;
  for (const lease of pool.l) if (lease.e <= nowMs) ended++;
  return pool.x + ended;
}

/** Ends first: the earlier end, then the lower owner token (the order the other stores show). */
function endsBefore(a: PermitLeaseRecord, b: PermitLeaseRecord): boolean {
  return a.e < b.e || (a.e === b.e && a.o < b.o);
}

function stateOf(pool: PoolRecord, waiters: number, nowMs: number): PermitState | null {
  const live = pool.l.filter((l) => l.e > nowMs);
  if (live.length === 0) return null;
  const shown = [...live].sort((a, b) => (endsBefore(a, b) ? -1 : endsBefore(b, a) ? 1 : 0)).slice(0, MAX_HOLDERS_SHOWN);
  return {
    capacity: pool.c,
    holderCount: live.length,
    holders: shown
      .sort((a, b) => a.t - b.t)
      .map((l) =>
        withReleaseRequest(
          { holder: l.h, weight: l.w, fencingToken: l.t, expiresAtMs: l.e, ttlRemainingMs: Math.max(0, Math.ceil(l.e - nowMs)) },
          l.r && requestOf(l.r),
        ),
      ),
    waiters,
  };
}
