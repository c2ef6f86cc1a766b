import type { ChangeFeed, IndexedLockState } from './lock-store.js';
import { WaitAbortedError } from './errors.js';

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

interface Watcher {
  readonly index: number;
  readonly resolve: (view: IndexedView) => void;
  readonly reject: (err: unknown) => void;
  readonly done: () => void;
}

interface Watched {
  readonly watchers: Set<Watcher>;
  /** Stops the change notices; set once subscribed. */
  stop?: () => void;
  subscribed: Promise<void>;
  last?: IndexedView;
  /** Fires at the current lease's end: an expiry writes nothing, so nothing would announce it. */
  leaseEnd?: NodeJS.Timeout;
  checking: boolean;
  /** Callers inside wait() for this key (also before their watcher is added). */
  users: number;
  /** A notice arrived while a check was running: check once more after it. */
  again: boolean;
}

/**
 * Blocking queries for one instance: however many callers watch a key here, the instance holds ONE
 * subscription to its change notices and ONE lease-end timer, and a change costs one state read, after
 * which every watcher whose index differs is answered in process. No polling, no herd on the store.
 */
export class ChangeWatch {
  private readonly watched = new Map<string, Watched>();

  constructor(
    private readonly feed: ChangeFeed,
    private readonly read: (id: string) => Promise<IndexedLockState>,
  ) {}

  /** Watchers waiting right now (all keys). */
  get size(): number {
    let n = 0;
    for (const w of this.watched.values()) n += w.watchers.size;
    return n;
  }

  /** The current view of `id`. */
  async current(id: string): Promise<IndexedView> {
    return withIndex(await this.read(id));
  }

  /**
   * Answers at once when the index differs from `index` (or waitMs is 0), otherwise as soon as it
   * changes, otherwise after `waitMs` with the unchanged view. `signal` ends the wait (caller gone).
   */
  async wait(id: string, index: number, waitMs: number, signal?: AbortSignal): Promise<IndexedView> {
    if (waitMs <= 0) return this.current(id);
    const entry = this.entry(id);
    entry.users++;
    try {
      // Subscribed BEFORE reading: a change after this read is announced after it, so it is not missed.
      await entry.subscribed;
      const view = await this.current(id);
      if (view.index !== index) return view;
      if (!entry.checking) this.remember(id, entry, view);
      signal?.throwIfAborted();
      return await new Promise<IndexedView>((resolve, reject) => {
        const timer = setTimeout(() => {
          done();
          resolve(aged(entry.last ?? view));
        }, waitMs);
        const onAbort = () => {
          done();
          reject(signal?.reason instanceof Error ? signal.reason : new WaitAbortedError());
        };
        const done = () => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          entry.watchers.delete(watcher);
        };
        const watcher: Watcher = { index, resolve, reject, done };
        entry.watchers.add(watcher);
        signal?.addEventListener('abort', onAbort, { once: true });
      });
    } finally {
      entry.users--;
      this.dropIfIdle(id, entry);
    }
  }

  /** Ends every wait (shutdown). */
  closeAll(err: Error): void {
    for (const entry of this.watched.values()) {
      for (const w of [...entry.watchers]) {
        w.done();
        w.reject(err);
      }
    }
  }

  private entry(id: string): Watched {
    let entry = this.watched.get(id);
    if (entry === undefined) {
      const created: Watched = { watchers: new Set(), subscribed: Promise.resolve(), checking: false, again: false, users: 0 };
      created.subscribed = this.feed.watchChanges(id, () => void this.check(id, created)).then((stop) => {
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

  /** One read for all watchers of `id`; those whose index differs are answered. */
  private async check(id: string, entry: Watched): Promise<void> {
    if (entry.checking) {
      entry.again = true;
      return;
    }
    entry.checking = true;
    try {
      do {
        entry.again = false;
        let view: IndexedView;
        try {
          view = await this.current(id);
        } catch (err) {
          for (const w of [...entry.watchers]) {
            w.done();
            w.reject(err);
          }
          return;
        }
        this.remember(id, entry, view);
        for (const w of [...entry.watchers]) {
          if (w.index !== view.index) {
            w.done();
            w.resolve(view);
          }
        }
      } while (entry.again);
    } finally {
      entry.checking = false;
      this.dropIfIdle(id, entry);
    }
  }

  /** Keeps the last view and sets the lease-end timer for it. */
  private remember(id: string, entry: Watched, view: IndexedView): void {
    entry.last = view;
    clearTimeout(entry.leaseEnd);
    entry.leaseEnd = undefined;
    const state = view.state;
    if (state === null) return;
    // +1: the lease is live up to and including its end millisecond on the store clock.
    entry.leaseEnd = setTimeout(() => void this.check(id, entry), Math.max(1, state.ttlRemainingMs + 1));
    entry.leaseEnd.unref();
  }

  private dropIfIdle(id: string, entry: Watched): void {
    if (entry.users > 0 || entry.checking || this.watched.get(id) !== entry) return;
    this.watched.delete(id);
    clearTimeout(entry.leaseEnd);
    entry.stop?.();
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
