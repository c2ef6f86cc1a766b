/**
 * The etcd store's lease engine: every key a pool of some capacity whose leases each take a weight,
 * with FIFO waiting and hand-off. A lock is a pool of capacity 1 (with its options: lock-delay,
 * idempotency, several keys at once for a lock set); a semaphore or read/write lock a pool of its
 * capacity (permit-values.ts). etcd-store.ts makes it the domain's port (lease-port.ts).
 *
 * Key layout (names built in etcd-keys.ts; records in etcd-pools.ts):
 *
 *   <prefix>lock/<id>, <prefix>pool/<kind>/<id>
 *       the key's pool: ONE JSON record holding its capacity, its watch-index base, its last fencing
 *       token and every lease not yet dropped. Every change is one transaction guarded by this
 *       record's mod revision (a lock set's: by each of its keys' records), so "does the weight fit"
 *       and "take it" are one atomic step. It hangs on a shared etcd lease that ends after its last
 *       lease's end (or lock-delay) plus the fencing grace.
 *   <prefix>queue/<id>#<waiterId>, <prefix>pqueue/<kind>/<id>#<waiterId>
 *       a queued caller on this instance's session lease: FIFO order is the create revision, and a
 *       dead instance's waiters vanish with its session.
 *
 * Fencing tokens: a change read at revision H commits at a revision above H, and the next change of
 * the pool reads at that revision or later. The i-th lease granted by a change gets
 * (H + 1) * INDEX_SCALE + i: strictly above every token the pool gave before, also after the pool was
 * forgotten or deleted (revisions only go up across the cluster, whatever happens to keys), and above
 * every token of a lock record written before locks were pools (those were revisions).
 *
 * Watch index: a lock's counts from its last fencing token (`f`, kept in the record after the lease
 * goes). A semaphore's or read/write lock's is the record's `x` ((H + 1) * INDEX_SCALE of its last
 * grant, release or eviction, not of a renewal) plus the leases in it that have ended: an expiry raises
 * it with nothing written, and the next change (which drops the ended leases) starts from a higher base.
 *
 * Lock-delay: an expired lease with one stays in the record, and blocks every grant path (acquire,
 * hand-over, lock set) until `e + d`; only a change after that drops it.
 *
 * One record per pool keeps each step a single compare-and-swap; its cost is the record's size, about
 * 80 bytes per live lease plus its holder label (etcd's default request limit of 1.5 MiB holds about
 * 19,000 unlabelled leases, 7,500 with 128-character labels; past it etcd refuses the put, and the
 * grant answers 503 with nothing taken).
 */
import { performance } from 'node:perf_hooks';
import type { Etcd3, IKeyValue, IRequestOp, ITxnRequest, ITxnResponse, Watcher } from 'etcd3';
import { IdempotencyKeyReusedError, InvalidRequestError, StoreUnavailableError, TooManyWaitersError } from '../../domain/errors.js';
import { compareIdempotencyKeys } from '../../domain/idempotency.js';
import type { EvictedLease, LeaseAcquire, LeaseAcquireOutcome, LeaseKind, LeaseRenewOutcome } from '../../domain/lease-store.js';
import type { IndexedLockState, ListPage, ListQuery, LockListRow, LockState } from '../../domain/lock-values.js';
import {
  withReleaseRequest,
  type IndexedPermitState,
  type PermitKind,
  type PermitListPage,
  type PermitListQuery,
  type PermitState,
  type QueuedCaller,
  type ReleaseRequest,
  type ReleaseRequestInput,
} from '../../domain/permit-values.js';
import { randomBase64url } from '../../domain/random.js';
import type { Clock } from '../shared/clock.js';
import type { CancelReply } from '../shared/lease-replies.js';
import { WaitRoom, type Waiter } from '../shared/wait-room.js';
import type { EtcdKeys } from './etcd-keys.js';
import { HandOverWatches } from './etcd-watches.js';
import type { Observed } from './etcd-records.js';
import { MAX_CAS_ROUNDS, parseJson, queuedCallers, queueReadLimit, requestOf, storedRequest } from './etcd-records.js';
import type { LeaseEngine } from '../shared/lease-port.js';
import {
  busyUntil,
  carried,
  delayEnd,
  indexOf,
  lastToken,
  liveLeases,
  lockStateOf,
  poolOf,
  stateOf,
  untilFirst,
  untilLast,
  used,
  type LeaseRecord,
  type LeaseWaiterRecord,
  type PoolRecord,
} from './etcd-pools.js';

/** What the engine uses of the etcd store it belongs to: its client, keys and plumbing. */
export interface EtcdLeasesDeps {
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

/** One key's pool record and the number of callers queued for it, read at one revision. */
interface KeyRead {
  readonly pool: Observed<PoolRecord> | null;
  readonly queued: number;
}

/**
 * 2^15: room per revision for the tokens of one change and for the ended leases counted into the
 * index. A pool's leases each weigh at least 1 and never exceed its capacity (at most 10,000), so
 * neither can reach it; revisions stay below 2^53 / 2^16 (1.4e11 writes), so tokens and a lock's watch
 * index (twice its token, + 1) stay safe integers.
 */
const INDEX_SCALE = 32_768;
/** Queue heads read per hand-over step (one transaction stays below etcd's 128 operations); a step that grants them all reads on. */
const HEADS_READ = 64;
const PRINTABLE_ID = /^[\x21-\x7e]+$/;
const CONTENDED = 'too much contention on one key to decide in time';

/**
 * This instance's acquires of one key, one compare-and-set at a time. Every change of a key is a
 * compare-and-set on its one record, given up after MAX_CAS_ROUNDS lost rounds: a burst of acquires of
 * one key on one instance (150 at once on a semaphore with room for all) lost to each other, round after
 * round, and some were answered 503 on a healthy etcd. In turn, each decides on a fresh read and loses a
 * round only to another instance. A caller's turn ends before it waits in the queue.
 */
class KeyTurns {
  private readonly tails = new Map<string, Promise<void>>();

  /** Resolves when it is this caller's turn on `key`, with the function that ends it (idempotent). */
  async take(key: string): Promise<() => void> {
    const before = this.tails.get(key) ?? Promise.resolve();
    let done!: () => void;
    const mine = new Promise<void>((resolve) => (done = resolve));
    const tail = before.then(() => mine);
    this.tails.set(key, tail);
    await before;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      done();
      if (this.tails.get(key) === tail) this.tails.delete(key);
    };
  }
}

export class EtcdLeases implements LeaseEngine {
  private readonly room: WaitRoom<LeaseAcquireOutcome>;
  private readonly handOvers: HandOverWatches;
  private readonly turns = new KeyTurns();

  constructor(private readonly deps: EtcdLeasesDeps) {
    this.room = new WaitRoom<LeaseAcquireOutcome>({
      confirm: (waiter) => this.confirm(waiter),
      // The caller's key is filled in by acquire (only a one-key acquire waits).
      notGranted: (retryAfterMs) => ({ acquired: false, reason: 'full', retryAfterMs, busyId: '' }),
      cancel: (waiter) => this.cancel(waiter),
      release: (roomKeyText, ownerToken) => {
        const { kind, id } = splitRoomKey(roomKeyText);
        return this.release(kind, [id], ownerToken);
      },
      visit: (roomKeyText, waiters) => this.visit(roomKeyText, waiters),
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

  /**
   * The session lease the queued callers' records hang on has ended: etcd deleted those records, so
   * nothing will hand these callers a key. Each is answered `reason` now (a lease handed to one just
   * before is given back first), rather than left to wait out its waitMs; later callers queue on a new
   * session.
   */
  async sessionLost(reason: unknown): Promise<void> {
    await this.room.closeAll(reason);
  }

  /** The one acquire: one key of any kind, or several lock keys at once (all or none). */
  async acquire(request: LeaseAcquire): Promise<LeaseAcquireOutcome> {
    const { kind, ids, ownerToken, ttlMs, signal, lockDelayMs = 0 } = request;
    // "" is no label, as in the other stores.
    const holder = request.holder === '' ? null : request.holder;
    // A caller that has already left takes nothing, not even a free key (nobody would release it).
    signal?.throwIfAborted();
    if (ids.length > 1) return this.acquireAll(kind, ids, { ownerToken, ttlMs, holder, lockDelayMs });
    const id = ids[0] as string;
    const endTurn = await this.turns.take(`${kind}\n${id}`);
    try {
      // (It may have left while others of this instance had their turn.)
      signal?.throwIfAborted();
      return await this.acquireInTurn(request, id, holder, endTurn);
    } finally {
      endTurn();
    }
  }

  /** acquire's compare-and-set rounds on one key, in this caller's turn (ended before it waits in the queue). */
  private async acquireInTurn(request: LeaseAcquire, id: string, holder: string | null, endTurn: () => void): Promise<LeaseAcquireOutcome> {
    const { kind, ownerToken, ttlMs, weight, capacity, waitMs = 0, idempotencyKey, lockDelayMs = 0 } = request;
    let handedOver = false;
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const decidedAt = performance.now();
      const { revision, reads } = await this.read(kind, [id]);
      const { pool, queued } = reads[0] as KeyRead;
      const nowMs = this.deps.now();
      const live = liveLeases(pool, nowMs);
      const own = live.find((l) => l.o === ownerToken);
      // Our own grant, from a call whose answer was lost and re-sent (the client retries on failover).
      if (own) return { acquired: true, fencingTokens: [own.t], expiresAtMs: own.e, decidedAt };
      if (pool && live.length > 0 && pool.value.c !== capacity) {
        return { acquired: false, reason: 'mismatch', capacity: pool.value.c, retryAfterMs: untilLast(live, nowMs) };
      }
      // An expired lease's lock-delay keeps the key from everyone (a retry with its idempotency key too).
      const room = used(live) + weight <= capacity && delayEnd(pool?.value ?? null, nowMs) === 0;
      if (room && queued > 0 && !handedOver) {
        // Room, but callers are queued: it is theirs first (a lease may have ended with nobody to hand it on).
        await this.handOver(kind, id);
        handedOver = true;
        continue;
      }
      if (room && queued === 0) {
        const base = (revision + 1) * INDEX_SCALE;
        const lease: LeaseRecord = {
          o: ownerToken,
          w: weight,
          e: Math.floor(nowMs) + ttlMs,
          h: holder,
          t: base,
          ...(idempotencyKey !== undefined ? { i: idempotencyKey } : {}),
          ...(lockDelayMs > 0 ? { d: lockDelayMs } : {}),
        };
        const txn = await this.deps.txn({
          compare: [this.unchanged(kind, id, pool)],
          success: [await this.putPool(kind, id, pool, { c: capacity, x: base, l: [...live, lease] }, nowMs)],
        });
        if (txn.succeeded) return { acquired: true, fencingTokens: [lease.t], expiresAtMs: lease.e, decidedAt };
        continue;
      }
      if (idempotencyKey !== undefined) {
        for (const lease of live) {
          const match = compareIdempotencyKeys(lease.i, idempotencyKey);
          if (match === 'reused') throw new IdempotencyKeyReusedError();
          if (match === 'replay') {
            // A retry of the acquire that made this lease (its answer was lost): the same grant, nothing changed.
            const replayed = { ownerToken: lease.o, holder: lease.h };
            return { acquired: true, fencingTokens: [lease.t], expiresAtMs: lease.e, decidedAt, replayed };
          }
        }
      }
      const retryAfterMs = untilFirst(pool?.value ?? null, live, nowMs);
      if (waitMs <= 0) return { acquired: false, reason: 'full', retryAfterMs, busyId: id };
      if (queued >= this.deps.maxWaitersPerKey) throw new TooManyWaitersError('key', retryAfterMs);
      // Waiting is not a compare-and-set: the others of this instance decide meanwhile.
      endTurn();
      const outcome = await this.enqueue(request, holder, retryAfterMs, pool);
      // The pool changed since it was read (a grant, maybe under another capacity): decide again.
      if (outcome === 'changed') continue;
      if (outcome.acquired) return { ...outcome, queued: true };
      return outcome.reason !== 'full' ? outcome : { ...outcome, busyId: id };
    }
    throw new StoreUnavailableError(CONTENDED);
  }

  /**
   * Several keys of capacity 1 (a lock set) under one owner token, in one transaction guarded by every
   * key's record: granted only if every key is free (no live lease, no lock-delay, nobody queued);
   * otherwise nothing is taken and the first busy key is named. Every key's token is the same.
   */
  private async acquireAll(
    kind: LeaseKind,
    ids: readonly string[],
    asked: { ownerToken: string; ttlMs: number; holder: string | null; lockDelayMs: number },
  ): Promise<LeaseAcquireOutcome> {
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const decidedAt = performance.now();
      const { revision, reads } = await this.read(kind, ids);
      const nowMs = this.deps.now();
      let busyId: string | undefined;
      let freeAt = 0;
      reads.forEach(({ pool, queued }, i) => {
        const until = busyUntil(pool?.value ?? null, liveLeases(pool, nowMs), queued, nowMs);
        if (until > freeAt) {
          freeAt = until;
          busyId ??= ids[i];
        }
      });
      if (busyId !== undefined) return { acquired: false, reason: 'full', retryAfterMs: Math.max(1, Math.ceil(freeAt - nowMs)), busyId };
      const base = (revision + 1) * INDEX_SCALE;
      const lease: LeaseRecord = {
        o: asked.ownerToken,
        w: 1,
        e: Math.floor(nowMs) + asked.ttlMs,
        h: asked.holder,
        t: base,
        ...(asked.lockDelayMs > 0 ? { d: asked.lockDelayMs } : {}),
      };
      const txn = await this.deps.txn({
        compare: ids.map((id, i) => this.unchanged(kind, id, reads[i]?.pool ?? null)),
        success: await Promise.all(
          ids.map((id, i) => this.putPool(kind, id, reads[i]?.pool ?? null, { c: 1, x: base, l: [lease] }, nowMs)),
        ),
      });
      if (txn.succeeded) return { acquired: true, fencingTokens: ids.map(() => base), expiresAtMs: lease.e, decidedAt };
    }
    throw new StoreUnavailableError('too much contention on a lock set to decide in time');
  }

  /** Extends the lease of `ownerToken` on every key, in one transaction, only if it holds a live one on each. */
  async renew(kind: LeaseKind, ids: readonly string[], ownerToken: string, ttlMs: number): Promise<LeaseRenewOutcome> {
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const { reads } = await this.read(kind, ids);
      const nowMs = this.deps.now();
      const held: Array<{ pool: Observed<PoolRecord>; lease: LeaseRecord }> = [];
      for (const { pool } of reads) {
        const lease = liveLeases(pool, nowMs).find((l) => l.o === ownerToken);
        if (!pool || !lease) return { renewed: false };
        held.push({ pool, lease });
      }
      const expiresAtMs = Math.floor(nowMs) + ttlMs;
      // A renewal is no change a watcher counts: the index base stays, and ended leases stay counted.
      const txn = await this.deps.txn({
        compare: ids.map((id, i) => this.unchanged(kind, id, held[i]?.pool ?? null)),
        success: await Promise.all(
          held.map(({ pool, lease }, i) => {
            const l = pool.value.l.map((x) => (x.t === lease.t && x.o === ownerToken ? { ...x, e: expiresAtMs } : x));
            return this.putPool(kind, ids[i] as string, pool, { c: pool.value.c, x: pool.value.x, l }, nowMs);
          }),
        ),
      });
      if (!txn.succeeded) continue;
      const asked = held.find(({ lease }) => lease.r !== undefined)?.lease.r;
      const fencingTokens = held.map(({ lease }) => lease.t);
      return withReleaseRequest({ renewed: true as const, fencingTokens, expiresAtMs }, asked && requestOf(asked));
    }
    throw new StoreUnavailableError(CONTENDED);
  }

  /** The request is written into the lease's entry of the pool record: it goes wherever the lease goes. */
  async requestRelease(kind: LeaseKind, id: string, fencingToken: number, request: ReleaseRequestInput): Promise<ReleaseRequest | null> {
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const { reads } = await this.read(kind, [id]);
      const { pool } = reads[0] as KeyRead;
      const nowMs = this.deps.now();
      const lease = liveLeases(pool, nowMs).find((l) => l.t === fencingToken);
      if (!pool || !lease) return null;
      const asked = { atMs: Math.floor(nowMs), by: request.by, reason: request.reason };
      // Not a change a watcher counts (as a renewal): the index base stays.
      const l = pool.value.l.map((x) => (x.o === lease.o ? { ...x, r: storedRequest(asked) } : x));
      const txn = await this.deps.txn({
        compare: [this.unchanged(kind, id, pool)],
        success: [await this.putPool(kind, id, pool, { c: pool.value.c, x: pool.value.x, l }, nowMs)],
      });
      if (txn.succeeded) return asked;
    }
    throw new StoreUnavailableError(CONTENDED);
  }

  /** Ends the lease of `ownerToken` on every key where it holds a live one, in one transaction; false when it held none. */
  async release(kind: LeaseKind, ids: readonly string[], ownerToken: string): Promise<boolean> {
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const { revision, reads } = await this.read(kind, ids);
      const nowMs = this.deps.now();
      const mine = ids
        .map((id, i) => ({ key: id, ...(reads[i] as KeyRead) }))
        .filter((x): x is { key: string; pool: Observed<PoolRecord>; queued: number } =>
          liveLeases(x.pool, nowMs).some((l) => l.o === ownerToken),
        );
      if (mine.length === 0) return false;
      const kept = mine.map(({ pool }) => liveLeases(pool, nowMs).filter((l) => l.o !== ownerToken));
      if (await this.dropLeases(kind, mine, revision, kept, nowMs)) return true;
    }
    throw new StoreUnavailableError(CONTENDED);
  }

  /** Ends every live lease on `id`, or the one with `fencingToken`: an administrator's override. */
  async forceRelease(kind: LeaseKind, id: string, fencingToken?: number): Promise<EvictedLease[]> {
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const { revision, reads } = await this.read(kind, [id]);
      const { pool, queued } = reads[0] as KeyRead;
      const nowMs = this.deps.now();
      // With a fencing token, only that lease goes (the one an administrator saw); none live: nothing changes.
      const evicted = liveLeases(pool, nowMs).filter((l) => fencingToken === undefined || l.t === fencingToken);
      if (!pool || evicted.length === 0) return [];
      const gone = new Set(evicted.map((l) => l.o));
      const kept = pool.value.l.filter((l) => !gone.has(l.o));
      if (await this.dropLeases(kind, [{ key: id, pool, queued }], revision, [kept], nowMs)) {
        return evicted.map((l) => ({ holder: l.h, fencingToken: l.t, ownerToken: l.o, expiresAtMs: l.e }));
      }
    }
    throw new StoreUnavailableError(CONTENDED);
  }

  /** Live queued callers in queue order (create revision), at most `limit`; never their owner tokens. */
  async queue(kind: LeaseKind, id: string, limit: number): Promise<QueuedCaller[]> {
    const range = this.deps.keys.leaseQueue(kind, id);
    const res = await this.deps.call(() =>
      this.deps.client.kv.range(
        { key: range.key, range_end: range.rangeEnd, sort_target: 'Create', sort_order: 'Ascend', limit: queueReadLimit(limit) },
        this.deps.callOptions(),
      ),
    );
    const callers = queuedCallers(res.kvs, this.deps.now(), limit);
    return kind === 'lock' ? callers.map(({ position, holder, waitingSinceMs }) => ({ position, holder, waitingSinceMs })) : callers;
  }

  /** etcd's own watch on the pool record: every grant, release, eviction or hand-over is a put. */
  async watchChanges(kind: LeaseKind, id: string, onChange: () => void): Promise<() => void> {
    // A watch connects once its stream does; while etcd is unreachable the client keeps trying for ever,
    // and a blocking query waited with it, past its waitMs and its caller's abort. Given up at one
    // call's deadline (a 503), and cancelled then: left, every refused watch stayed in the client.
    const watcher = await this.deps.call(async () => {
      const made = this.deps.client.watch().key(this.deps.keys.leaseRecord(kind, id)).watcher();
      try {
        await connectedBy(made, this.deps.callOptions().deadline);
        return made;
      } catch (err) {
        void made.cancel().catch(() => undefined);
        throw err;
      }
    });
    watcher.on('put', () => onChange());
    watcher.on('delete', () => onChange());
    // A watch that reconnects may have missed events: read again.
    watcher.on('connected', () => onChange());
    watcher.on('error', () => undefined);
    return () => void watcher.cancel().catch(() => undefined);
  }

  /** A lock's live lease, as the port's inspect answers it. */
  async lockState(id: string): Promise<LockState | null> {
    const { reads } = await this.read('lock', [id]);
    const { pool, queued } = reads[0] as KeyRead;
    return lockStateOf(pool?.value ?? null, queued, this.deps.now());
  }

  /** A lock's state with what its watch index needs (the port's inspectIndexed). */
  async lockIndexed(id: string): Promise<IndexedLockState> {
    const { reads } = await this.read('lock', [id]);
    const { pool, queued } = reads[0] as KeyRead;
    const nowMs = this.deps.now();
    const delayedUntil = delayEnd(pool?.value ?? null, nowMs);
    return {
      state: lockStateOf(pool?.value ?? null, queued, nowMs),
      lastFencingToken: lastToken(pool?.value ?? null),
      ...(delayedUntil > 0 ? { lockDelayUntilMs: delayedUntil } : {}),
    };
  }

  /** Held locks in id order from the cursor (the last id of the previous page). */
  async listLocks(query: ListQuery): Promise<ListPage> {
    const { ids, nextCursor } = await this.page('lock', query);
    const leases: LockListRow[] = [];
    for (const id of ids) {
      // The queue count is read with the record, at one revision.
      const state = await this.lockState(id);
      if (state) leases.push({ id, ...state });
    }
    return { leases, nextCursor };
  }

  // ---- the reads of semaphores and read/write locks ----

  async inspectPermits(kind: PermitKind, id: string): Promise<PermitState | null> {
    return (await this.inspectPermitsIndexed(kind, id)).state;
  }

  async inspectPermitsIndexed(kind: PermitKind, id: string): Promise<IndexedPermitState> {
    const { reads } = await this.read(kind, [id]);
    const { pool, queued } = reads[0] as KeyRead;
    if (!pool) return { state: null, index: 0 };
    const nowMs = this.deps.now();
    return { state: stateOf(pool.value, queued, nowMs), index: indexOf(pool.value, nowMs) };
  }

  async listPermits(kind: PermitKind, query: PermitListQuery): Promise<PermitListPage> {
    const { ids, nextCursor } = await this.page(kind, query);
    const entries: Array<{ id: string; state: PermitState }> = [];
    for (const id of ids) {
      // The queue count is read with the pool, at one revision.
      const state = await this.inspectPermits(kind, id);
      if (state) entries.push({ id, state });
    }
    return { entries, nextCursor };
  }

  // ---- waiting ----

  /**
   * Queues the caller, only if the pool is still as `pool` was read (the decision to queue was made on it:
   * its capacity, and no room); 'changed' (nothing queued) when it is not.
   */
  private async enqueue(
    input: LeaseAcquire,
    holder: string | null,
    retryAfterMs: number,
    pool: Observed<PoolRecord> | null,
  ): Promise<LeaseAcquireOutcome | 'changed'> {
    const { kind, ownerToken, ttlMs, waitMs = 0, signal, lockDelayMs = 0 } = input;
    const id = input.ids[0] as string;
    const waiterId = randomBase64url(9);
    const waiter = this.room.register({ id: waiterId, key: roomKey(kind, id), ownerToken, ttlMs });
    try {
      // Written first: the record's create revision is the caller's place in the queue.
      const session = await this.deps.sessionLease();
      const now = this.deps.now();
      // A lock's waiter carries no weight or capacity (1 and 1): the record lock waiters always had.
      const record: LeaseWaiterRecord = {
        o: ownerToken,
        ttl: ttlMs,
        d: now + waitMs,
        h: holder,
        s: now,
        ...(kind === 'lock' ? {} : { w: input.weight, c: input.capacity }),
        ...(lockDelayMs > 0 ? { ld: lockDelayMs } : {}),
      };
      const key = this.deps.keys.leaseWaiter(kind, id, waiterId);
      const txn = await this.deps.txn({
        compare: [this.unchanged(kind, id, pool)],
        success: [{ request_put: { key, value: Buffer.from(JSON.stringify(record)), lease: session } }],
      });
      if (!txn.succeeded) {
        waiter.drop();
        return 'changed';
      }
    } catch (err) {
      waiter.drop();
      throw err;
    }
    const outcome = waiter.wait(waitMs, retryAfterMs, signal);
    // A hand-over made before the watch is in place is found by this visit (and by every heartbeat);
    // the visit also covers room freed between the read and the queueing.
    void this.watchPool(kind, id)
      .catch(() => undefined)
      .then(() => this.room.visitAll());
    return outcome;
  }

  /** The waiter was handed a lease: renewing restarts its full TTL from now and confirms it is still its. */
  private async confirm(waiter: Waiter): Promise<LeaseAcquireOutcome> {
    const decidedAt = performance.now();
    const { kind, id } = splitRoomKey(waiter.key);
    const reply = await this.renew(kind, [id], waiter.ownerToken, waiter.ttlMs);
    if (!reply.renewed) throw new StoreUnavailableError('a lease was handed over, but it ran out before it could be delivered');
    return { acquired: true, fencingTokens: reply.fencingTokens, expiresAtMs: reply.expiresAtMs, decidedAt };
  }

  private async cancel(waiter: Waiter): Promise<CancelReply> {
    const { kind, id } = splitRoomKey(waiter.key);
    const txn = await this.deps.txn({
      success: [
        { request_delete_range: { key: this.deps.keys.leaseWaiter(kind, id, waiter.id) } },
        { request_range: { key: this.deps.keys.leaseRecord(kind, id) } },
      ],
    });
    const pool = poolOf(txn.responses[1]?.response_range.kvs[0]);
    const nowMs = this.deps.now();
    const live = liveLeases(pool, nowMs);
    const mine = live.find((l) => l.o === waiter.ownerToken);
    if (mine) return { held: true, fencingToken: mine.t, expiresAtMs: mine.e };
    // A waiter leaving from the head may let those behind it in (readers behind a writer who gave up).
    void this.handOver(kind, id).catch(() => undefined);
    // Time left on whoever holds it now: the caller's "not acquired" says when to try again.
    return { held: false, retryAfterMs: live.length > 0 ? untilFirst(pool?.value ?? null, live, nowMs) : 0 };
  }

  private async visit(roomKeyText: string, waiters: readonly Waiter[]): Promise<{ remainingLeaseMs: number; grantedWaiterIds: string[] }> {
    const { kind, id } = splitRoomKey(roomKeyText);
    await this.handOver(kind, id);
    const { reads } = await this.read(kind, [id]);
    const { pool } = reads[0] as KeyRead;
    const nowMs = this.deps.now();
    const live = liveLeases(pool, nowMs);
    if (live.length === 0) {
      // A lock-delay running: visit again when it ends, and hand the key on then.
      const delayedUntil = delayEnd(pool?.value ?? null, nowMs);
      return { remainingLeaseMs: delayedUntil > 0 ? Math.ceil(delayedUntil - nowMs) : 0, grantedWaiterIds: [] };
    }
    const owners = new Set(live.map((l) => l.o));
    return {
      remainingLeaseMs: untilFirst(pool?.value ?? null, live, nowMs),
      grantedWaiterIds: waiters.filter((w) => owners.has(w.ownerToken)).map((w) => w.id),
    };
  }

  /**
   * Grants the queue's heads, in order, for as long as the head's weight fits (no overtaking) and no
   * lock-delay runs, in one transaction: the pool gains their leases and their waiter records go,
   * guarded by all their revisions. Waiters whose wait has ended are dropped on the way.
   */
  private async handOver(kind: LeaseKind, id: string): Promise<void> {
    const keys = this.deps.keys;
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const queue = keys.leaseQueue(kind, id);
      const read = await this.deps.txn({
        success: [
          { request_range: { key: keys.leaseRecord(kind, id) } },
          { request_range: { key: queue.key, range_end: queue.rangeEnd, sort_target: 'Create', sort_order: 'Ascend', limit: HEADS_READ } },
        ],
      });
      const revision = Number(read.header.revision);
      const pool = poolOf(read.responses[0]?.response_range.kvs[0]);
      const heads = read.responses[1]?.response_range.kvs ?? [];
      if (heads.length === 0) return;
      const nowMs = this.deps.now();
      if (delayEnd(pool?.value ?? null, nowMs) > 0) return;
      const live = liveLeases(pool, nowMs);
      const base = (revision + 1) * INDEX_SCALE;
      const leases = [...live];
      const ended: IRequestOp[] = [];
      const taken: Array<{ kv: IKeyValue; id: string }> = [];
      let capacity = live.length > 0 && pool ? pool.value.c : undefined;
      for (const kv of heads) {
        const value = parseJson<LeaseWaiterRecord>(kv.value);
        if (!value || value.d <= nowMs) {
          ended.push({ request_delete_range: { key: kv.key } });
          continue;
        }
        capacity ??= value.c ?? 1;
        const weight = value.w ?? 1;
        if (used(leases) + weight > capacity) break;
        const lease: LeaseRecord = {
          o: value.o,
          w: weight,
          e: Math.floor(nowMs) + value.ttl,
          h: value.h,
          t: base + taken.length,
          ...(value.ld ? { d: value.ld } : {}),
        };
        leases.push(lease);
        taken.push({ kv, id: keys.waiterIdOf(kv.key) });
      }
      if (taken.length === 0) {
        if (ended.length > 0) await this.deps.txn({ success: ended });
        if (ended.length === heads.length && heads.length === HEADS_READ) continue;
        return;
      }
      const next = { c: capacity as number, x: base, l: leases, g: taken.map((t) => t.id) };
      const txn = await this.deps.txn({
        compare: [
          this.unchanged(kind, id, pool),
          ...taken.map(({ kv }) => ({ key: kv.key, target: 'Mod' as const, result: 'Equal' as const, mod_revision: kv.mod_revision })),
        ],
        success: [
          ...ended,
          await this.putPool(kind, id, pool, next, nowMs),
          ...taken.map(({ kv }): IRequestOp => ({ request_delete_range: { key: kv.key } })),
        ],
      });
      if (txn.succeeded) {
        // Every head read was granted (or dropped) and more may be queued: the room may hold them too (a
        // released writer lets in every reader at the head, far more than one read's heads).
        if (heads.length === HEADS_READ && taken.length + ended.length === heads.length) round = -1;
        else return;
      }
    }
  }

  /** One watch per pool this instance has callers waiting for; a put naming one of them is its hand-over. */
  private async watchPool(kind: LeaseKind, id: string): Promise<void> {
    const handedTo = (value: Buffer) => parseJson<PoolRecord>(value)?.g ?? [];
    await this.deps.call(() => this.handOvers.open(roomKey(kind, id), this.deps.keys.leaseRecord(kind, id), handedTo));
  }

  // ---- plumbing ----

  /** The pool records and queue counts of `ids`, read together, and the revision read at. */
  private async read(kind: LeaseKind, ids: readonly string[]): Promise<{ revision: number; reads: KeyRead[] }> {
    const read = await this.deps.txn({
      success: ids.flatMap((id): IRequestOp[] => {
        const queue = this.deps.keys.leaseQueue(kind, id);
        return [
          { request_range: { key: this.deps.keys.leaseRecord(kind, id) } },
          { request_range: { key: queue.key, range_end: queue.rangeEnd, count_only: true } },
        ];
      }),
    });
    const reads = ids.map((_, i) => ({
      pool: poolOf(read.responses[2 * i]?.response_range.kvs[0]),
      queued: Number(read.responses[2 * i + 1]?.response_range.count ?? 0),
    }));
    return { revision: Number(read.header.revision), reads };
  }

  /**
   * A release or an eviction: writes each pool read at `revision` with only the leases `kept` (a change
   * a watcher counts: the index base moves), in one transaction, then hands the room freed to the
   * callers queued. False when a pool changed since it was read (nothing was written).
   */
  private async dropLeases(
    kind: LeaseKind,
    changed: ReadonlyArray<{ key: string; pool: Observed<PoolRecord>; queued: number }>,
    revision: number,
    kept: ReadonlyArray<readonly LeaseRecord[]>,
    nowMs: number,
  ): Promise<boolean> {
    const x = (revision + 1) * INDEX_SCALE;
    const txn = await this.deps.txn({
      compare: changed.map(({ key: id, pool }) => this.unchanged(kind, id, pool)),
      success: await Promise.all(
        changed.map(({ key: id, pool }, i) => this.putPool(kind, id, pool, { c: pool.value.c, x, l: kept[i] ?? [] }, nowMs)),
      ),
    });
    if (!txn.succeeded) return false;
    await Promise.all(changed.filter((c) => c.queued > 0).map((c) => this.handOver(kind, c.key).catch(() => undefined)));
    return true;
  }

  /** The compare of a change: the pool record is as it was read (absent: still absent). */
  private unchanged(kind: LeaseKind, id: string, pool: Observed<PoolRecord> | null) {
    return {
      key: this.deps.keys.leaseRecord(kind, id),
      target: 'Mod' as const,
      result: 'Equal' as const,
      mod_revision: pool ? pool.kv.mod_revision : '0',
    };
  }

  /** The put of a pool record after `prior`, carrying its last token and lock-delay (etcd-pools.ts: carried). */
  private putPool(
    kind: LeaseKind,
    id: string,
    prior: Observed<PoolRecord> | null,
    next: Pick<PoolRecord, 'c' | 'x' | 'l' | 'g'>,
    nowMs: number,
  ): Promise<IRequestOp> {
    const record = carried(kind, prior?.value ?? null, next, nowMs, this.deps.graceMs);
    return this.deps.putOp(this.deps.keys.leaseRecord(kind, id), record, record.k);
  }

  /** Record keys in key order from the cursor; keys with no live lease are left out. */
  private async page(kind: LeaseKind, { prefix, limit, cursor }: ListQuery): Promise<{ ids: string[]; nextCursor: string | null }> {
    // A cursor is the last id of a page listed with the same prefix: printable and starting with it.
    if (cursor !== undefined && !(PRINTABLE_ID.test(cursor) && cursor.startsWith(prefix))) {
      throw new InvalidRequestError('cursor', 'must be a nextCursor returned by this route');
    }
    const keys = this.deps.keys;
    const range = keys.leaseRecords(kind, prefix);
    const start = cursor !== undefined ? Buffer.concat([keys.leaseRecord(kind, cursor), Buffer.from([0])]) : range.key;
    const res = await this.deps.call(() =>
      this.deps.client.kv.range({ key: start, range_end: range.rangeEnd, limit }, this.deps.callOptions()),
    );
    const nowMs = this.deps.now();
    const ids: string[] = [];
    let last: string | undefined;
    for (const kv of res.kvs) {
      const id = keys.leaseIdOf(kind, kv.key);
      if (id === null) continue;
      last = id;
      if (liveLeases(poolOf(kv), nowMs).length > 0) ids.push(id);
    }
    return { ids, nextCursor: res.more && last !== undefined ? last : null };
  }
}

function roomKey(kind: LeaseKind, id: string): string {
  return `${kind} ${id}`;
}

function splitRoomKey(text: string): { kind: LeaseKind; id: string } {
  const at = text.indexOf(' ');
  return { kind: text.slice(0, at) as LeaseKind, id: text.slice(at + 1) };
}

/** Resolves once `watcher` is connected; rejects on its error, or once `deadline` (ms since the epoch) passes. */
function connectedBy(watcher: Watcher, deadline: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const done = (err?: unknown) => {
      clearTimeout(timer);
      watcher.off('connected', onConnected);
      watcher.off('error', onError);
      if (err === undefined) resolve();
      else reject(err instanceof Error ? err : new Error('the etcd watch failed', { cause: err }));
    };
    const onConnected = () => done();
    const onError = (err: unknown) => done(err);
    const timer = setTimeout(() => done(new Error('etcd did not answer before the deadline')), Math.max(0, deadline - Date.now()));
    watcher.on('connected', onConnected);
    watcher.on('error', onError);
  });
}
