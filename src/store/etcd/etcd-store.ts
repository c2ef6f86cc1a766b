import { BrokenCircuitError, handleWhen, retry } from 'cockatiel';
import { Etcd3, type IRequestOp, type ITxnRequest, type ITxnResponse, type Lease } from 'etcd3';
import { StoreUnavailableError } from '../../domain/errors.js';
import { sharedWallClock, type Clock } from '../shared/clock.js';
import { startHeartbeat } from '../shared/wait-room.js';
import type { LeaseStore, Store } from '../../domain/lease-store.js';
import type { QuotaSlotOutcome } from '../../domain/lock-values.js';
import { EtcdKeys } from './etcd-keys.js';
import { EtcdLeases } from './etcd-leases.js';
import { callEtcd, MAX_CAS_ROUNDS, parseJson } from './etcd-records.js';
import { leaseStoreOver } from '../shared/lease-port.js';

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
 * 3 s: the session lease every waiter record of this instance hangs on. If the instance dies its
 * keep-alives stop, etcd deletes its waiters within this, and they are never handed a lock nobody
 * would use (the Redis store's WAITER_LIVENESS_MS, enforced by etcd).
 */
const SESSION_TTL_S = 3;
/** Pool records and slots hang on shared leases, one per second of end time: etcd removes them once ended. */
const LEASE_BUCKET_MS = 1000;
/** Records outlive their keep-until by this before etcd drops them (a dropped record is simply a free key). */
const RECORD_SLACK_MS = 2000;
/**
 * Reservations of one namespace decided in one transaction, and ended slots dropped in it: with the
 * version key's put, well under the 128 operations etcd allows in a transaction (--max-txn-ops).
 */
const QUOTA_BATCH = 64;
const ENDED_DROPPED = 32;

/**
 * The etcd store, for deployments that need consensus: every change is a Raft-replicated transaction,
 * so a grant acknowledged to a caller survives the loss of any minority of members.
 *
 * One lease engine (etcd-leases.ts) serves every primitive: a lock is its capacity-1 case and a lock
 * set its several-keys case; `leases` is that engine as the domain's port.
 *
 * - Check-and-set: each change is one etcd transaction guarded by the key's record's mod revision (a
 *   lock set's: every key's); a change that lost a race is re-read and decided again.
 * - Fencing tokens: derived from the etcd revision the granting change was decided at. Revisions only
 *   go up across the whole cluster (Raft), whatever happens to individual keys.
 * - TTLs: a lease's end is written in the record; the record also hangs on an etcd lease so that etcd
 *   itself deletes it once it has ended (etcd leases count whole seconds, so they are for clean-up,
 *   not for the millisecond expiry the API promises).
 * - Waiting: waiters are keys under the key's queue prefix, in create-revision order (FIFO across all
 *   instances), on this instance's session lease. Whoever frees room hands it to the first live
 *   waiters in the same transaction; a waiter's instance learns it from a watch on the record.
 *
 * Time: etcd has no clock an application can read, so lease ends are computed on the keyholder
 * instance's clock: its wall clock as NTP keeps it, never read backwards (sharedWallClock). Instances
 * must keep their clocks in step (NTP); skew between instances eats into the lease exactly as a
 * client's own clock error does.
 */
export class EtcdStore implements Store {
  readonly kind = 'etcd';
  /** Every lease: locks, lock sets (one transaction over all their records), semaphores and read/write locks. */
  readonly engine: EtcdLeases;
  /** The domain's one port: the engine, with this store's kind and quota slots. */
  readonly leases: LeaseStore;
  private readonly client: Etcd3;
  private readonly keys: EtcdKeys;
  private readonly timeoutMs: number;
  private readonly now: Clock;
  /** Lease ends are computed on this instance's clock (Store.clock). */
  get clock(): Clock {
    return this.now;
  }
  private readonly heartbeat: NodeJS.Timeout;
  private readonly bucketLeases = new Map<number, Promise<string>>();
  private session: Lease | undefined;
  private closed = false;
  /** Each namespace's reservations waiting for the batch being decided (see reserveQuotaSlot). */
  private readonly quotaAsks = new Map<string, QuotaAsk[]>();

  constructor(options: EtcdStoreOptions) {
    this.keys = new EtcdKeys(options.keyPrefix);
    this.timeoutMs = options.commandTimeoutMs;
    this.now = options.clock ?? sharedWallClock;
    this.client = new Etcd3({
      hosts: [...options.endpoints],
      // No dialTimeout: etcd3 1.1 declares it but never reads it. Each call carries its own deadline
      // (callOptions), which bounds a connection that cannot be made as well.
      // A call is sent again by the client only when it never went out (its default re-sends after a lost
      // connection too, up to three times): a transaction etcd applied whose reply was lost, sent again,
      // fails its compare, and the engine read that as "not held": a release that freed the lock answered
      // not_owner, a lock set the caller held came back busy. A call whose outcome is unknown is a 503
      // (callEtcd), as on Redis. One that could not reach a member (refused, or its breaker open) goes to
      // another: with no retry at all, every call routed to a dead member of three was a 503.
      faultHandling: { global: retry(handleWhen(notSent), { maxAttempts: options.endpoints.length }) },
    });
    this.engine = new EtcdLeases({
      client: this.client,
      keys: this.keys,
      graceMs: options.fenceGraceMs,
      maxWaitersPerKey: options.maxWaitersPerKey ?? 1000,
      now: this.now,
      txn: (request) => this.txn(request),
      call: (run) => this.call(run),
      putOp: (key, value, endMs) => this.putOp(key, value, endMs),
      callOptions: () => this.callOptions(),
      sessionLease: () => this.sessionLease(),
    });
    this.leases = leaseStoreOver(this, this.engine);
    this.heartbeat = startHeartbeat(() => this.engine.visitAll());
  }

  /**
   * Optimistic: decide on a snapshot of the namespace's slots, then one transaction that writes only if
   * no reservation happened since (its version key unchanged) and otherwise reads the new snapshot, so
   * each round under contention is one round trip.
   *
   * The reservations this instance asks for one namespace meanwhile are decided together, in one such
   * transaction (in the order they were asked): every reservation compares and bumps the namespace's one
   * version key, so each round admits one transaction of the namespace, and decided one at a time a burst
   * of more than MAX_CAS_ROUNDS acquires at once in one namespace answered the rest 503 ("too much
   * contention") far below the limit, on a healthy etcd.
   */
  reserveQuotaSlot(namespace: string, quotaSlotId: string, ttlMs: number, maxQuotaSlots: number): Promise<QuotaSlotOutcome> {
    return new Promise<QuotaSlotOutcome>((resolve, reject) => {
      const ask: QuotaAsk = { quotaSlotId, ttlMs, maxQuotaSlots, resolve, reject };
      const waiting = this.quotaAsks.get(namespace);
      // A batch of this namespace is being decided: this one goes in the next.
      if (waiting) {
        waiting.push(ask);
        return;
      }
      this.quotaAsks.set(namespace, [ask]);
      void this.decideQuotaAsks(namespace);
    });
  }

  /** Decides the namespace's waiting reservations, a batch at a time, until none is left. */
  private async decideQuotaAsks(namespace: string): Promise<void> {
    for (;;) {
      const waiting = this.quotaAsks.get(namespace) ?? [];
      if (waiting.length === 0) {
        this.quotaAsks.delete(namespace);
        return;
      }
      // At most QUOTA_BATCH a transaction (etcd refuses more than 128 operations in one); the rest next.
      const batch = waiting.splice(0, QUOTA_BATCH);
      try {
        const outcomes = await this.reserveQuotaSlots(namespace, batch);
        batch.forEach((ask, i) => ask.resolve(outcomes[i] as QuotaSlotOutcome));
      } catch (err) {
        for (const ask of batch) ask.reject(err);
      }
    }
  }

  private async reserveQuotaSlots(namespace: string, batch: readonly QuotaAsk[]): Promise<QuotaSlotOutcome[]> {
    const slots = this.keys.quotaSlots(namespace);
    const snapshot: IRequestOp[] = [
      { request_range: { key: this.keys.quotaSlotVersion(namespace) } },
      { request_range: { key: slots.key, range_end: slots.rangeEnd } },
    ];
    const asked = new Set(batch.map((ask) => ask.quotaSlotId));
    let read = await this.txn({ success: snapshot });
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const version = read.responses[0]?.response_range.kvs[0];
      const nowMs = this.now();
      const all = (read.responses[1]?.response_range.kvs ?? []).map((kv) => ({ kv, e: parseJson<{ e: number }>(kv.value)?.e ?? 0 }));
      // A slot asked for again is counted once, as the one written now.
      const ends = all.filter((x) => x.e > nowMs && !asked.has(this.keys.waiterIdOf(x.kv.key))).map((x) => x.e);
      const outcomes: QuotaSlotOutcome[] = [];
      const puts: IRequestOp[] = [];
      for (const ask of batch) {
        if (ends.length >= ask.maxQuotaSlots) {
          outcomes.push({ reserved: false, retryAfterMs: Math.max(1, Math.ceil(Math.min(...ends) - nowMs)) });
          continue;
        }
        const expiresAtMs = nowMs + ask.ttlMs;
        ends.push(expiresAtMs);
        outcomes.push({ reserved: true });
        puts.push(await this.putOp(this.keys.quotaSlot(namespace, ask.quotaSlotId), { e: expiresAtMs }, expiresAtMs));
      }
      if (puts.length === 0) return outcomes;
      const txn = await this.txn({
        compare: [
          { key: this.keys.quotaSlotVersion(namespace), target: 'Mod', result: 'Equal', mod_revision: version?.mod_revision ?? '0' },
        ],
        success: [
          ...puts,
          { request_put: { key: this.keys.quotaSlotVersion(namespace), value: Buffer.from(String(nowMs)) } },
          // Ended slots are dropped here too, so a namespace's range stays short (not one written now:
          // etcd refuses a transaction that puts and deletes the same key).
          // At most ENDED_DROPPED of them: etcd refuses a transaction of more than 128 operations, and with
          // every ended slot in it, a namespace in which more than that many leases had just ended (etcd
          // deletes them itself some 2 s after their end) had every reservation refused, 503, until then.
          ...all
            .filter((x) => x.e <= nowMs && !asked.has(this.keys.waiterIdOf(x.kv.key)))
            .slice(0, ENDED_DROPPED)
            .map((x): IRequestOp => ({ request_delete_range: { key: x.kv.key } })),
        ],
        failure: snapshot,
      });
      if (txn.succeeded) return outcomes;
      read = txn;
    }
    throw new StoreUnavailableError('too much contention on one namespace quota to decide in time');
  }

  async extendQuotaSlot(namespace: string, quotaSlotId: string, expiresAtMs: number): Promise<void> {
    const key = this.keys.quotaSlot(namespace, quotaSlotId);
    const retired = this.keys.retiredQuotaSlot(namespace, quotaSlotId);
    // The slot and its retired mark in one read (one round trip, as the slot alone).
    const read: IRequestOp[] = [{ request_range: { key } }, { request_range: { key: retired } }];
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const res = await this.txn({ success: read });
      // Retired: its lease is gone, and this renewal was decided before it went (QuotaSlotStore.retireQuotaSlot).
      if ((res.responses[1]?.response_range.kvs.length ?? 0) > 0) return;
      const kv = res.responses[0]?.response_range.kvs[0];
      const current = kv ? parseJson<{ e: number }>(kv.value)?.e : undefined;
      // A missing (or ended) slot is counted again (QuotaSlotStore.extendQuotaSlot says why).
      if (current !== undefined && current >= expiresAtMs) return;
      const txn = await this.txn({
        compare: [
          // Mod revision 0: the slot is still missing.
          { key, target: 'Mod', result: 'Equal', mod_revision: kv?.mod_revision ?? '0' },
          // And not retired since it was read.
          { key: retired, target: 'Mod', result: 'Equal', mod_revision: '0' },
        ],
        success: [await this.putOp(key, { e: expiresAtMs }, expiresAtMs)],
      });
      if (txn.succeeded) return;
    }
    // As reserveQuotaSlots: told, not taken for done (the slot would keep its old end).
    throw new StoreUnavailableError('too much contention on one quota slot to extend it in time');
  }

  async freeQuotaSlot(namespace: string, quotaSlotId: string): Promise<void> {
    await this.call(() => this.client.kv.deleteRange({ key: this.keys.quotaSlot(namespace, quotaSlotId) }, this.callOptions()));
  }

  /** One transaction: the slot goes and its retired mark is written, kept by etcd until `untilMs`. */
  async retireQuotaSlot(namespace: string, quotaSlotId: string, untilMs: number): Promise<void> {
    const free: IRequestOp = { request_delete_range: { key: this.keys.quotaSlot(namespace, quotaSlotId) } };
    if (untilMs <= this.now()) {
      await this.txn({ success: [free] });
      return;
    }
    await this.txn({ success: [free, await this.putOp(this.keys.retiredQuotaSlot(namespace, quotaSlotId), { r: untilMs }, untilMs)] });
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
      const value = parseJson<{ e?: number; k?: number; r?: number }>(kv.value);
      const keepUntil = value?.k ?? value?.e ?? value?.r;
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
    await this.engine.closeAll(new StoreUnavailableError('the store is closing'));
    if (this.session) await this.session.revoke().catch(() => undefined);
    this.client.close();
  }

  // ---- plumbing ----

  /** This instance's session lease (kept alive by the client); a lost one is replaced for new waiters. */
  private async sessionLease(): Promise<string> {
    if (!this.session || this.session.revoked()) {
      const lease = this.client.lease(SESSION_TTL_S);
      lease.on('lost', () => {
        if (this.session !== lease) return;
        this.session = undefined;
        void this.engine.sessionLost(
          new StoreUnavailableError("the instance's session with etcd ended, and with it the caller's place in the queue: ask again", 1000),
        );
      });
      this.session = lease;
    }
    const lease = this.session;
    return this.call(() => lease.grant());
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

/** One reservation waiting to be decided with its namespace's batch. */
interface QuotaAsk {
  readonly quotaSlotId: string;
  readonly ttlMs: number;
  readonly maxQuotaSlots: number;
  resolve(outcome: QuotaSlotOutcome): void;
  reject(err: unknown): void;
}

/**
 * An etcd call that never reached a member: its connection was refused (gRPC's "No connection established",
 * ECONNREFUSED), or the member's breaker refused it before sending. Sent again to another member, it
 * cannot apply twice.
 */
function notSent(err: Error): boolean {
  return err instanceof BrokenCircuitError || /No connection established|ECONNREFUSED/.test(err.message);
}
