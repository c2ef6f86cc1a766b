import { performance } from 'node:perf_hooks';
import { StoreUnavailableError } from '../../domain/errors.js';
import type { CancelReply } from './lease-replies.js';

/** A caller of this instance queued for a lock in the store (Redis or etcd). */
export interface Waiter {
  readonly id: string;
  readonly key: string;
  readonly ownerToken: string;
  readonly ttlMs: number;
}

/**
 * The lease a hand-over message names: the fencing token and the lease's end (store clock) the store
 * gave the waiter, and `registeredAt`, performance.now() when the waiter was registered, before its
 * acquire was sent. The hand-over came later than that, so a lease counted from `registeredAt` ends no
 * later than the one the store holds: a safe lower bound for the freshness checks.
 */
export interface HandedLease {
  readonly fencingToken: number;
  readonly expiresAtMs: number;
  readonly registeredAt: number;
}

/**
 * What the room needs from the store: each is one script call. `O` is the store's answer to an acquire
 * (a lock's, or a semaphore's or read/write lock's: the room serves both, one room each).
 */
export interface WaitRoomOps<O> {
  /**
   * The waiter was handed the lock: confirm (and restart) its lease. Rejects if the lease is gone.
   * `handed`: what the hand-over message said, when it said it (a store may answer from it without a
   * call); absent when the grant was found otherwise (a heartbeat, a cancel).
   */
  confirm(waiter: Waiter, handed?: HandedLease): Promise<O>;
  /** The answer to a caller whose wait ran out without a grant. */
  notGranted(retryAfterMs: number): O;
  /**
   * Takes the waiter out of the queue; says whether it was granted the lock in the meantime, and if not,
   * how long the current lease has left.
   */
  cancel(waiter: Waiter): Promise<CancelReply>;
  release(key: string, ownerToken: string): Promise<boolean>;
  /**
   * Refreshes these waiters, hands over an expired lease, and reports time left and any grants to them,
   * and (`lostWaiterIds`) those of them that neither hold a lease nor are queued any more: their place is
   * gone (a record that lapsed while the store was out of reach is dropped as a dead instance's).
   */
  visit(
    key: string,
    waiters: readonly Waiter[],
  ): Promise<{ remainingLeaseMs: number; grantedWaiterIds: readonly string[]; lostWaiterIds?: readonly string[] }>;
}

/**
 * 1 s: how often an instance visits the keys its callers wait for: it tells the store they are still
 * there, and finds hand-overs whose message (or watch event) went missing and leases that ran out.
 */
export const HEARTBEAT_INTERVAL_MS = 1000;

/** Calls `visit` every HEARTBEAT_INTERVAL_MS; the timer never keeps a process alive that is otherwise done. */
export function startHeartbeat(visit: () => void): NodeJS.Timeout {
  const timer = setInterval(visit, HEARTBEAT_INTERVAL_MS);
  timer.unref();
  return timer;
}

type State =
  /** Registered; the acquire script has not answered yet. */
  | 'pending'
  /** In the queue, waiting for a hand-over. */
  | 'waiting'
  /** Leaving: being confirmed, cancelled or cleaned up. */
  | 'settling'
  | 'done';

/**
 * 60 s: how long a finished waiter's id is remembered at least (at most twice that), so that a hand-over message arriving late for
 * it is recognised (and ignored) rather than mistaken for something new.
 */
const RETIRED_WAITER_MEMORY_MS = 60_000;

class LocalWaiter<O> implements Waiter {
  state: State = 'pending';
  grantedEarly = false;
  /** What the hand-over message said, if a message told of the grant. */
  handed: HandedLease | undefined;
  /** performance.now() at registration: before the acquire script was sent. */
  readonly registeredAt = performance.now();
  /** Answered by closeAll (its outcome rejected, its lease given back): whatever the script answers, the caller gets that (enter). */
  closed = false;
  timer: NodeJS.Timeout | undefined;
  /** performance.now() when its wait runs out (set when it starts waiting). */
  deadline = Infinity;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
  readonly outcome: Promise<O>;
  resolve!: (outcome: O) => void;
  reject!: (err: unknown) => void;

  constructor(
    readonly id: string,
    readonly key: string,
    readonly ownerToken: string,
    readonly ttlMs: number,
    private readonly room: WaitRoom<O>,
  ) {
    this.outcome = new Promise<O>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    // The outcome can be settled before anyone awaits it: closing the store rejects a waiter whose
    // acquire script has not answered yet, and its caller only reaches the outcome once that answer
    // arrives. Node would report that rejection as unhandled meanwhile (and, by default, end the
    // process); the caller still gets it from `wait()`.
    this.outcome.catch(() => undefined);
  }

  /** Waits in the queue: the script answered "queued". */
  wait(waitMs: number, retryAfterMs: number, signal?: AbortSignal): Promise<O> {
    return this.room.startWaiting(this, waitMs, retryAfterMs, signal);
  }

  /**
   * Runs the acquire script that may queue this caller; if it fails (or the caller is gone already), the
   * waiter is dropped. If the store closed while the script ran, the caller gets the closing error
   * whatever the script answered: closing cancelled the caller in Redis, which gave back a lease the
   * script may have granted it.
   */
  async enter<R>(signal: AbortSignal | undefined, run: () => Promise<R>): Promise<R> {
    try {
      signal?.throwIfAborted();
      const reply = await run();
      // A closed waiter's outcome is rejected with the closing error: awaiting it throws that.
      if (this.closed) await this.outcome;
      return reply;
    } catch (err) {
      this.drop();
      throw err;
    }
  }

  /** The script did not queue this caller (granted at once, refused, or failed). */
  drop(): void {
    this.room.forget(this);
  }
}

/**
 * This instance's callers waiting for locks in Redis: it turns hand-over messages, heartbeats, time-outs
 * and disconnects into exactly one answer per waiter, and makes sure a lease handed to a caller that
 * has gone is released again (the next waiter then gets it).
 */
export class WaitRoom<O> {
  private readonly waiters = new Map<string, LocalWaiter<O>>();
  private readonly byKey = new Map<string, Set<LocalWaiter<O>>>();
  private readonly keyTimers = new Map<string, NodeJS.Timeout>();
  /** Ids of the waiters finished in this period and in the one before (see finish). */
  private retiring: string[] = [];
  private retired: string[] = [];
  private retireTimer: NodeJS.Timeout | undefined;

  constructor(private readonly ops: WaitRoomOps<O>) {}

  /** Whether any caller of this instance still waits for `key`. */
  hasWaitersOn(key: string): boolean {
    return (this.byKey.get(key)?.size ?? 0) > 0;
  }

  register(waiter: Waiter): LocalWaiter<O> {
    const local = new LocalWaiter<O>(waiter.id, waiter.key, waiter.ownerToken, waiter.ttlMs, this);
    this.waiters.set(local.id, local);
    let set = this.byKey.get(local.key);
    if (!set) this.byKey.set(local.key, (set = new Set()));
    set.add(local);
    return local;
  }

  startWaiting(waiter: LocalWaiter<O>, waitMs: number, retryAfterMs: number, signal?: AbortSignal): Promise<O> {
    if (waiter.closed) return waiter.outcome;
    waiter.state = 'waiting';
    if (waiter.grantedEarly) {
      this.settleGranted(waiter);
      return waiter.outcome;
    }
    waiter.deadline = performance.now() + waitMs;
    waiter.timer = setTimeout(() => this.onTimeout(waiter), waitMs);
    if (signal) {
      waiter.signal = signal;
      waiter.onAbort = () => this.onAbort(waiter);
      if (signal.aborted) waiter.onAbort();
      else signal.addEventListener('abort', waiter.onAbort, { once: true });
    }
    this.scheduleVisit(waiter.key, retryAfterMs);
    return waiter.outcome;
  }

  /**
   * A hand-over message (or a heartbeat) says this waiter now holds the lock; a message names the
   * lease it was handed (`lease`), which the store may answer with instead of confirming it.
   */
  granted(id: string, lease?: { readonly fencingToken: number; readonly expiresAtMs: number }): void {
    const waiter = this.waiters.get(id);
    if (!waiter) return;
    if (lease !== undefined && (waiter.state === 'pending' || waiter.state === 'waiting')) {
      waiter.handed = { fencingToken: lease.fencingToken, expiresAtMs: lease.expiresAtMs, registeredAt: waiter.registeredAt };
    }
    if (waiter.state === 'pending') waiter.grantedEarly = true;
    else if (waiter.state === 'waiting') this.settleGranted(waiter);
  }

  /** Heartbeat for every key this instance has waiters on. */
  visitAll(): void {
    for (const key of this.byKey.keys()) this.visitKey(key);
  }

  async closeAll(reason: unknown): Promise<void> {
    for (const timer of this.keyTimers.values()) clearTimeout(timer);
    this.keyTimers.clear();
    const leaving = [...this.waiters.values()].filter((w) => w.state === 'waiting' || w.state === 'pending');
    await Promise.allSettled(
      leaving.map(async (waiter) => {
        waiter.closed = true;
        this.leave(waiter);
        // Answered once a lease handed to it is given back (or with why it could not be): its quota slot
        // is freed on that answer, and must count until then (onAbort says why).
        await this.giveBackHanded(waiter).then(
          () => waiter.reject(reason),
          (error: unknown) => {
            waiter.reject(error);
            throw error;
          },
        );
      }),
    );
  }

  forget(waiter: LocalWaiter<O>): void {
    this.leave(waiter);
    waiter.state = 'done';
    this.waiters.delete(waiter.id);
  }

  private settleGranted(waiter: LocalWaiter<O>): void {
    this.leave(waiter);
    this.ops.confirm(waiter, waiter.handed).then(
      (outcome) => this.finish(waiter, () => waiter.resolve(outcome)),
      (err: unknown) => this.finish(waiter, () => waiter.reject(err)),
    );
  }

  private onTimeout(waiter: LocalWaiter<O>): void {
    if (waiter.state !== 'waiting') return;
    // Time left on the lease as of now (the cancel ran on the Redis clock), not as of the last visit.
    this.cancelAndAnswer(waiter, (reply) => this.ops.notGranted(Math.max(1, reply.retryAfterMs)));
  }

  /**
   * Takes a waiter out of the store's queue and answers it: with the lease handed to it meanwhile, if one
   * was (granted just as it left: the caller gets the lock), else with `notHeld`'s answer or error.
   */
  private cancelAndAnswer(waiter: LocalWaiter<O>, notHeld: (reply: Extract<CancelReply, { held: false }>) => O): void {
    this.leave(waiter);
    this.ops
      .cancel(waiter)
      .then(async (reply): Promise<O> => (reply.held ? this.ops.confirm(waiter) : notHeld(reply)))
      .then(
        (outcome) => this.finish(waiter, () => waiter.resolve(outcome)),
        (err: unknown) => this.finish(waiter, () => waiter.reject(err)),
      );
  }

  private onAbort(waiter: LocalWaiter<O>): void {
    if (waiter.state !== 'waiting') return;
    this.leave(waiter);
    const reason: unknown = waiter.signal?.reason;
    // Nobody will use a lease handed to this caller: give it back so the next waiter gets it, and only
    // then answer. The caller's quota slot is freed on that answer: answered first, the slot went back
    // while the lease handed to it still lived in the store (one round trip, or its whole TTL when the
    // give-back failed), and the namespace could hold one lease over its cap. A give-back that fails
    // answers with its error (the store's outcome unknown), and the slot then counts to its own end.
    this.giveBackHanded(waiter).then(
      () => this.finish(waiter, () => waiter.reject(reason)),
      (error: unknown) => this.finish(waiter, () => waiter.reject(error)),
    );
  }

  /**
   * The store no longer queues this waiter and holds nothing for it: its record lapsed while this instance
   * could not reach the store (a master down or failing over for longer than the waiter liveness), and the
   * next hand-over dropped it as a dead instance's. Nothing will be handed to it, so it is answered now
   * (503, ask again), as etcd answers the waiters of a session that ended, not left to wait out its waitMs
   * and be told the key was held. One close to its own end is left to its timer (a wait that runs out).
   */
  private lost(id: string): void {
    const waiter = this.waiters.get(id);
    if (!waiter || waiter.state !== 'waiting' || waiter.deadline - performance.now() <= HEARTBEAT_INTERVAL_MS) return;
    this.cancelAndAnswer(waiter, () => {
      throw new StoreUnavailableError("the caller's place in the queue was lost while the store was out of reach: ask again", 1000);
    });
  }

  /** Takes a waiter that leaves out of the store's queue, and gives back a lease handed to it meanwhile. */
  private async giveBackHanded(waiter: LocalWaiter<O>): Promise<void> {
    const reply = await this.ops.cancel(waiter);
    if (reply.held) await this.ops.release(waiter.key, waiter.ownerToken);
  }

  /** Takes the waiter out of this instance's bookkeeping (not yet out of the map of known ids). */
  private leave(waiter: LocalWaiter<O>): void {
    waiter.state = 'settling';
    clearTimeout(waiter.timer);
    if (waiter.signal && waiter.onAbort) waiter.signal.removeEventListener('abort', waiter.onAbort);
    const set = this.byKey.get(waiter.key);
    set?.delete(waiter);
    if (set?.size === 0) {
      this.byKey.delete(waiter.key);
      clearTimeout(this.keyTimers.get(waiter.key));
      this.keyTimers.delete(waiter.key);
    }
  }

  private finish(waiter: LocalWaiter<O>, answer: () => void): void {
    waiter.state = 'done';
    answer();
    // Forgotten a period or two later, by one timer for all of them: a timer per hand-off was a
    // measurable part of it.
    this.retiring.push(waiter.id);
    if (this.retireTimer === undefined) {
      this.retireTimer = setInterval(() => this.forgetRetired(), RETIRED_WAITER_MEMORY_MS);
      this.retireTimer.unref();
    }
  }

  /** Forgets the waiters finished in the period before the last: each is remembered one to two periods. */
  private forgetRetired(): void {
    for (const id of this.retired) if (this.waiters.get(id)?.state === 'done') this.waiters.delete(id);
    this.retired = this.retiring;
    this.retiring = [];
    if (this.retired.length === 0) {
      clearInterval(this.retireTimer);
      this.retireTimer = undefined;
    }
  }

  private waitingOn(key: string): LocalWaiter<O>[] {
    return [...(this.byKey.get(key) ?? [])].filter((w) => w.state === 'waiting');
  }

  /** Visits a key when its current lease is due to end, so an expired lease is handed over promptly. */
  private scheduleVisit(key: string, inMs: number): void {
    clearTimeout(this.keyTimers.get(key));
    const timer = setTimeout(() => this.visitKey(key), Math.max(0, inMs) + 2);
    timer.unref();
    this.keyTimers.set(key, timer);
  }

  private visitKey(key: string): void {
    const waiting = this.waitingOn(key);
    if (waiting.length === 0) return;
    this.ops.visit(key, waiting).then(
      ({ remainingLeaseMs, grantedWaiterIds, lostWaiterIds = [] }) => {
        for (const id of grantedWaiterIds) this.granted(id);
        for (const id of lostWaiterIds) this.lost(id);
        if (this.byKey.has(key) && remainingLeaseMs > 0) this.scheduleVisit(key, remainingLeaseMs);
      },
      // Redis unreachable: the next heartbeat tries again; waits that run out answer on their own.
      () => undefined,
    );
  }
}
