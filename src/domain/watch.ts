import { performance } from 'node:perf_hooks';
import type { ChangeFeed, IndexedLockState } from './lock-values.js';
import { WaitAbortedError } from './errors.js';
import type { LeaseStore } from './lease-store.js';
import type { IndexedPermitState, PermitKind } from './permit-values.js';

/**
 * The watch index of a key: 2 * fencingToken while held, 2 * lastFencingToken + 1 while free.
 *
 * Why it works without a single extra write: fencing tokens only go up (floored at the store clock in
 * microseconds, see fencing.ts), so a grant (new token, even) is above any earlier state, and a release,
 * force release or expiry (same token, odd) is above the grant it ends. Every hand-over is a grant.
 * A renewal is not a change (same holder, same token).
 *
 * A free key whose state was forgotten after the fencing grace period reads as token 0, index 1: lower
 * than the 2t+1 it had. That is the one step down, and it is harmless because clients compare for
 * INEQUALITY only (as with Consul's X-Consul-Index when it resets): the watcher wakes, sees a free lock
 * (as before), and watches index 1; the next grant is floored at the clock and so differs from 1.
 *
 * Hook for other primitives (semaphores, rwlocks): give their inspect the same shape (state + last
 * token they issued), compute their index with this function, and announce every change from their
 * Lua scripts with publishChange (src/store/redis/scripts/_watch.lua) on the key's change channel, or
 * emit from the memory store's `changed(key)`; ChangeWatch then serves `?index=&waitMs=` for them.
 */
export function lockIndex(view: Pick<IndexedLockState, 'state' | 'lastFencingToken'>): number {
  return view.state ? 2 * view.state.fencingToken : 2 * view.lastFencingToken + 1;
}

export interface IndexedView extends IndexedLockState {
  readonly index: number;
}

/** What a blocking query needs of a primitive's state: a per-key index that changes on every change. */
export interface Watchable {
  readonly index: number;
}

/** Where a ChangeWatch gets its views: change notices, state reads, and the primitive's own timing. */
export interface WatchSource<V extends Watchable> {
  /** Change notices of the ids this source reads. */
  watchChanges(id: string, onChange: () => void): Promise<() => void>;
  read(id: string): Promise<V>;
  /**
   * Milliseconds after the read until the view changes with nothing written (a lease ends: nothing
   * announces an expiry), or undefined when it cannot. The watch re-reads then.
   */
  changesByItselfInMs(view: V): number | undefined;
  /** The last view read, as answered after a wait with nothing changed (time left recomputed for now). */
  aged(view: V): V;
}

/** The lock's source: its indexed state, re-read at its lease's end. */
export function lockWatchSource(store: ChangeFeed & { inspectIndexed(id: string): Promise<IndexedLockState> }): WatchSource<IndexedView> {
  return {
    watchChanges: (id, onChange) => store.watchChanges(id, onChange),
    read: async (id) => withIndex(await store.inspectIndexed(id)),
    // +1: the lease is live up to and including its end millisecond on the store clock.
    changesByItselfInMs: (view) => (view.state === null ? undefined : view.state.ttlRemainingMs + 1),
    aged,
  };
}

/** A semaphore's or read/write lock's source: its indexed state, re-read when its earliest lease ends. */
export function permitWatchSource(
  store: Pick<LeaseStore, 'watchChanges' | 'inspectIndexed'>,
  kind: PermitKind,
): WatchSource<IndexedPermitState> {
  return {
    watchChanges: (id, onChange) => store.watchChanges(kind, id, onChange),
    read: (id) => store.inspectIndexed(kind, id),
    changesByItselfInMs: (view) => {
      const ends = view.state?.holders.map((h) => h.ttlRemainingMs) ?? [];
      // +1: a lease is live up to and including its end millisecond on the store clock.
      return ends.length === 0 ? undefined : Math.min(...ends) + 1;
    },
    aged: (view) => {
      if (view.state === null) return view;
      const now = Date.now();
      const holders = view.state.holders.map((h) => ({ ...h, ttlRemainingMs: Math.max(0, Math.ceil(h.expiresAtMs - now)) }));
      return { ...view, state: { ...view.state, holders } };
    },
  };
}

interface Watcher<V> {
  readonly index: number;
  readonly onChange: ((view: V) => void) | undefined;
  readonly resolve: (view: V) => void;
  readonly reject: (err: unknown) => void;
  readonly done: () => void;
}

interface Watched<V> {
  readonly watchers: Set<Watcher<V>>;
  /** Stops the change notices; set once subscribed. */
  stop?: () => void;
  subscribed: Promise<void>;
  last?: V;
  /**
   * The state read in flight, started after the subscription: callers arriving meanwhile share it (a
   * thousand watchers arriving together cost one read, not a thousand). A change after it was sent is
   * announced after it, and the check that notice starts reads again and answers them.
   */
  reading?: Promise<V>;
  /** Reads started so far, and the number of the one in `reading`: which reads began after a caller came. */
  readsStarted: number;
  readingNumber: number;
  /** Fires when the view changes by itself (a lease's end): an expiry writes nothing, so nothing would announce it. */
  leaseEnd?: NodeJS.Timeout;
  checking: boolean;
  /** Callers inside wait() for this key (also before their watcher is added). */
  users: number;
  /** A notice arrived while a check was running: check once more after it. */
  again: boolean;
  /** Set while nobody waits: the subscription is kept until it fires (see LINGER_MS). */
  linger?: NodeJS.Timeout;
}

/**
 * How long a key's subscription outlives its last watcher. A blocking query's caller asks again right
 * after each answer: without this, every change would cost an UNSUBSCRIBE and a SUBSCRIBE, and the
 * next wait of a thousand callers would queue behind the subscription's round trip.
 */
export const LINGER_MS = 5_000;

/**
 * How long (ms) one turn of the event loop may spend answering the watchers a change woke (see check)
 * before it yields to everyone else's I/O; at least one watcher is answered per turn. Each answer is a
 * socket write of up to ~20 KB (a semaphore's view of 100 holders: ~11 KB), and another tenant's call
 * waits for one such turn at every step it takes (read, store reply, answer). A time, not a count: an
 * answer costs ~0.1 ms on an idle machine, but on a busy host the process is put off the CPU in the
 * middle of a turn, and a count of answers (8 was the last) then went on answering after the stall
 * while the other tenant's calls, already late, still waited. With a time the turn ends at the first
 * answer that finds the budget spent.
 */
export const WAKE_TURN_BUDGET_MS = 1;

/**
 * How long (ms) the answering rests after each turn before the next (see WAKE_TURN_BUDGET_MS): the
 * process's other work runs meanwhile, and the fan-out takes at most about half its time, not a whole
 * core while it lasts. On a busy host a process that keeps a core busy for a few hundred ms (1,000 answers
 * of ~11 KB) is put off the CPU for whole time slices, and every other tenant's call in flight then
 * waits for them. 2, not 1: the timer counts from the loop's clock, read when the loop iteration began,
 * which is up to a turn before the turn ended (a 1 ms timer then fired 0.7 ms after a 1.5 ms turn).
 */
export const WAKE_TURN_REST_MS = 2;

/**
 * Blocking queries for one instance: however many callers watch a key here, the instance holds ONE
 * subscription to its change notices and ONE lease-end timer, and a change costs one state read, after
 * which every watcher whose index differs is answered in process. No polling, no herd on the store.
 * Callers arriving together share one read too. Generic over the primitive (locks, semaphores and
 * read/write locks): the source says how to read a key and when it changes by itself.
 */
export class ChangeWatch<V extends Watchable = IndexedView> {
  private readonly watched = new Map<string, Watched<V>>();
  /** Immediate reads asked for in this turn of the event loop and not yet sent, by id (see current). */
  private readonly pendingReads = new Map<string, Promise<V>>();

  /**
   * `coalesce`: immediate reads of one id asked for in one turn of the event loop share one read, sent
   * once the turn's requests have all been taken in (for views whose read costs more than a round trip,
   * e.g. a semaphore's page of up to 100 holders).
   */
  constructor(
    private readonly source: WatchSource<V>,
    private readonly coalesce = false,
  ) {}

  /** Watchers waiting right now (all keys). */
  get size(): number {
    let n = 0;
    for (const w of this.watched.values()) n += w.watchers.size;
    return n;
  }

  /**
   * The current view of `id`. Coalescing, callers asking in one turn of the event loop get the same
   * view object, from one read sent after the last of them asked (setImmediate: after the turn's I/O
   * callbacks). Never a read already sent: that one may have left before a change the caller saw
   * complete, so every caller's view is read after it asked, as without coalescing.
   */
  current(id: string): Promise<V> {
    if (!this.coalesce) return this.source.read(id);
    let pending = this.pendingReads.get(id);
    if (pending === undefined) {
      pending = new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
        this.pendingReads.delete(id);
        return this.source.read(id);
      });
      this.pendingReads.set(id, pending);
    }
    return pending;
  }

  /**
   * Answers at once when the index differs from `index` (or waitMs is 0), otherwise as soon as it
   * changes, otherwise after `waitMs` with the unchanged view. `signal` ends the wait (caller gone).
   *
   * `onChange`, when given, is called with the view when a change ends this wait, synchronously in the
   * pass that wakes every watcher of the key, before the returned promise settles (not when the wait
   * ends at once or by running out). A caller that answers there answers the watchers in turns of
   * WAKE_TURN_BUDGET_MS: a promise's continuations run in turns, every watcher's first step before any one's
   * second, so answering after the await would delay the first answer until all of them reached it.
   * If it throws, the wait rejects with what it threw.
   */
  async wait(id: string, index: number, waitMs: number, signal?: AbortSignal, onChange?: (view: V) => void): Promise<V> {
    if (waitMs <= 0) return this.current(id);
    const entry = this.entry(id);
    entry.users++;
    try {
      // Subscribed BEFORE reading: a change after this read is announced after it, so it is not missed.
      await entry.subscribed;
      const readsBefore = entry.readsStarted;
      let view = await this.sharedRead(id, entry);
      // A shared read may have been sent before the answer that gave the caller its index (a check's
      // read still in flight when that answer went out): an index below the caller's is such an older
      // state, never news. Read once more, with a read sent after this call, and take what it says
      // (indexes rise with the fencing tokens; after the grace an idle key starts again at 1, which the
      // second read then confirms).
      if (view.index < index) view = await this.sharedRead(id, entry, readsBefore);
      if (view.index !== index) return view;
      if (!entry.checking && entry.last !== view) {
        // Watchers already waiting at another index: this read found a change nothing announced (an
        // expiry read before the lease-end timer fired, which remember replaces). Check them now.
        let behind = false;
        for (const w of entry.watchers) {
          if (w.index === view.index) continue;
          behind = true;
          break;
        }
        this.remember(id, entry, view);
        if (behind) void this.check(id, entry);
      }
      signal?.throwIfAborted();
      return await new Promise<V>((resolve, reject) => {
        const timer = setTimeout(() => {
          done();
          resolve(this.source.aged(entry.last ?? view));
        }, waitMs);
        const onAbort = () => {
          done();
          // Stryker disable next-line OptionalChaining: onAbort is only ever registered on a signal, so signal is set here
          reject(signal?.reason instanceof Error ? signal.reason : new WaitAbortedError());
        };
        const done = () => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          entry.watchers.delete(watcher);
        };
        const watcher: Watcher<V> = { index, onChange, resolve, reject, done };
        entry.watchers.add(watcher);
        // Stryker disable next-line ObjectLiteral,BooleanLiteral: a signal aborts once, and onAbort's done() removes the listener anyway
        signal?.addEventListener('abort', onAbort, { once: true });
      });
    } finally {
      entry.users--;
      this.dropIfIdle(id, entry);
    }
  }

  /** Ends every wait (shutdown). */
  closeAll(err: Error): void {
    for (const [id, entry] of this.watched) {
      for (const w of [...entry.watchers]) {
        w.done();
        w.reject(err);
      }
      if (entry.linger !== undefined) {
        clearTimeout(entry.linger);
        clearTimeout(entry.leaseEnd);
        this.watched.delete(id);
        // Stryker disable next-line OptionalChaining: a lingering entry got past its subscription, which set stop
        entry.stop?.();
      }
    }
  }

  private entry(id: string): Watched<V> {
    let entry = this.watched.get(id);
    if (entry !== undefined) {
      clearTimeout(entry.linger);
      entry.linger = undefined;
    }
    if (entry === undefined) {
      const created: Watched<V> = {
        watchers: new Set(),
        subscribed: Promise.resolve(),
        checking: false,
        // Stryker disable next-line BooleanLiteral: every check sets again to false before it reads it
        again: false,
        users: 0,
        readsStarted: 0,
        readingNumber: 0,
      };
      created.subscribed = this.source
        .watchChanges(id, () => void this.check(id, created))
        .then((stop) => {
          // Everyone left while the subscription was being made.
          if (this.watched.get(id) !== created) stop();
          else created.stop = stop;
        });
      created.subscribed.catch(() => this.watched.get(id) === created && this.watched.delete(id));
      this.watched.set(id, created);
      entry = created;
    }
    return entry;
  }

  /**
   * The read in flight for `id` if there is one (and it is one of the reads started after the first
   * `startedAfter`), else a new one that later callers share.
   */
  private sharedRead(id: string, entry: Watched<V>, startedAfter = -1): Promise<V> {
    return entry.reading !== undefined && entry.readingNumber > startedAfter ? entry.reading : this.freshRead(id, entry);
  }

  /** A new read of `id`, which callers arriving while it is in flight share. */
  private freshRead(id: string, entry: Watched<V>): Promise<V> {
    const reading = this.source.read(id);
    entry.reading = reading;
    entry.readingNumber = ++entry.readsStarted;
    const clear = () => {
      if (entry.reading === reading) entry.reading = undefined;
    };
    reading.then(clear, clear);
    return reading;
  }

  /** One read for all watchers of `id`; those whose index differs are answered. */
  private async check(id: string, entry: Watched<V>): Promise<void> {
    if (entry.checking) {
      entry.again = true;
      return;
    }
    if (entry.users === 0) {
      // Nobody waits (the subscription lingers): nothing to answer, and the next caller reads afresh.
      entry.last = undefined;
      clearTimeout(entry.leaseEnd);
      return;
    }
    entry.checking = true;
    try {
      do {
        entry.again = false;
        let view: V;
        try {
          // A new read, never the one in flight: that one may have been sent before the change.
          view = await this.freshRead(id, entry);
        } catch (err) {
          for (const w of [...entry.watchers]) {
            w.done();
            w.reject(err);
          }
          return;
        }
        this.remember(id, entry, view);
        const woken = [...entry.watchers].filter((w) => w.index !== view.index);
        for (let next = 0; next < woken.length;) {
          // Between two turns the event loop serves everyone else's I/O, and what that I/O queued for
          // the end of its turn (betweenTurns): a thousand watchers of one key (~0.2 ms of answer each
          // on a busy host) would otherwise hold it some 200 ms, every other tenant's calls queued
          // behind. A watcher that left meanwhile (timed out, aborted, shut down) was answered by its
          // own path and is skipped.
          if (next > 0) await betweenTurns();
          const turnStartedAt = performance.now();
          const answered: Array<Watcher<V>> = [];
          const failures: Array<{ err: unknown } | undefined> = [];
          while (next < woken.length) {
            const w = woken[next++] as Watcher<V>;
            if (!entry.watchers.has(w)) continue;
            answered.push(w);
            failures.push(answerFirst(w, view));
            if (performance.now() - turnStartedAt >= WAKE_TURN_BUDGET_MS) break;
          }
          // Every answer of the turn first (onChange), then the bookkeeping (timers, abort listeners):
          // the last answer waits for all the work done before it.
          answered.forEach((w, i) => {
            w.done();
            const failure = failures[i];
            if (failure === undefined) w.resolve(view);
            else w.reject(failure.err);
          });
        }
      } while (entry.again);
    } finally {
      entry.checking = false;
      this.dropIfIdle(id, entry);
    }
  }

  /** Keeps the last view and sets the timer for when it changes by itself. */
  private remember(id: string, entry: Watched<V>, view: V): void {
    entry.last = view;
    clearTimeout(entry.leaseEnd);
    entry.leaseEnd = undefined;
    const inMs = this.source.changesByItselfInMs(view);
    if (inMs === undefined) return;
    entry.leaseEnd = setTimeout(() => void this.check(id, entry), Math.max(1, inMs));
    entry.leaseEnd.unref();
  }

  private dropIfIdle(id: string, entry: Watched<V>): void {
    if (entry.users > 0 || entry.checking || this.watched.get(id) !== entry || entry.linger !== undefined) return;
    entry.linger = setTimeout(() => {
      entry.linger = undefined;
      // Stryker disable next-line LogicalOperator: a caller's arrival clears this timer, so it fires only for an idle, watched entry
      if (entry.users > 0 || entry.checking || this.watched.get(id) !== entry) return;
      this.watched.delete(id);
      clearTimeout(entry.leaseEnd);
      // Stryker disable next-line OptionalChaining: an idle, watched entry got past its subscription, which set stop
      entry.stop?.();
    }, LINGER_MS);
    entry.linger.unref();
  }
}

/**
 * The pause between two turns of answers: WAKE_TURN_REST_MS, then two setImmediate hops. One hop would
 * resume the answers ahead of the work that I/O read meanwhile queued for the end of its turn (its
 * setImmediate comes later in the same queue): another tenant's store call, written to Redis in one batch
 * at the end of the turn that made it (scripts.ts), left only after a whole turn of answers. With two,
 * the second hop is queued after everything queued before the first ran, and so runs after it.
 */
function betweenTurns(): Promise<void> {
  return new Promise<void>((resolve) => setTimeout(() => setImmediate(() => setImmediate(resolve)), WAKE_TURN_REST_MS));
}

/** Calls `watcher`'s onChange with `view`; what it threw, if anything (its wait then rejects with it). */
function answerFirst<V>(watcher: Watcher<V>, view: V): { err: unknown } | undefined {
  try {
    watcher.onChange?.(view);
    return undefined;
  } catch (err) {
    return { err };
  }
}

/**
 * The last view read, with the time left recomputed for now. A timed-out wait answers from it rather
 * than reading again (a thousand watchers timing out together would be a thousand reads); a renewal
 * since that read (not a change) is not in it, so expiresAt may be the earlier one.
 */
function aged(view: IndexedView): IndexedView {
  if (view.state === null) return view;
  return { ...view, state: { ...view.state, ttlRemainingMs: Math.max(0, Math.ceil(view.state.expiresAtMs - Date.now())) } };
}

function withIndex(view: IndexedLockState): IndexedView {
  return { ...view, index: lockIndex(view) };
}
