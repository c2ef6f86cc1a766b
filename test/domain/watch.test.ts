import { afterEach, describe, expect, it, vi } from 'vitest';
import { ShuttingDownError, WaitAbortedError } from '../../src/domain/errors.js';
import type { IndexedPermitState, PermitHolder } from '../../src/domain/permit-values.js';
import type { LeaseStore } from '../../src/domain/lease-store.js';
import { ChangeWatch, LINGER_MS, lockIndex, lockWatchSource, permitWatchSource } from '../../src/domain/watch.js';
import { settled, TestSource, type View } from '../helpers/driven-watch-source.js';

/**
 * Blocking queries (ChangeWatch) on one instance, over a source the test drives: a key's view changes
 * when the test says so, and a change notice reaches the watch only when the test sends it. So every
 * promise of a watch is checked on its own: an answer at once when the index differs, a wake-up on
 * the change that follows, an answer after waitMs with the unchanged view, a wake-up when a lease
 * ends with nothing announced, one subscription and one read for many watchers, and a clean end
 * (caller gone, shutdown). The stores' own change feeds are checked by the store contracts.
 */

afterEach(() => {
  vi.useRealTimers();
});

describe('ChangeWatch', () => {
  it('waitMs 0 or a differing index answers at once with the current view, and keeps nobody waiting', async () => {
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 4 });
    expect(await watch.current('k')).toEqual({ index: 4 });
    expect(await watch.wait('k', 4, 0)).toEqual({ index: 4 });
    expect(await watch.wait('k', 4, -1)).toEqual({ index: 4 });
    // waitMs 0 subscribes to nothing.
    expect(source.subscribes).toBe(0);
    expect(await watch.wait('k', 3, 10_000)).toEqual({ index: 4 });
    expect(watch.size).toBe(0);
  });

  it('the same index waits until the view changes, then answers every watcher with the new view', async () => {
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 4 });
    const first = watch.wait('k', 4, 10_000);
    const second = watch.wait('k', 4, 10_000);
    const other = watch.wait('other', 1, 10_000);
    await vi.waitFor(() => expect(watch.size).toBe(3));
    expect(await settled(first)).toBe(false);
    // One subscription per key, however many watch it.
    expect(source.subscribes).toBe(2);
    source.set('k', { index: 6 });
    expect(await first).toEqual({ index: 6 });
    expect(await second).toEqual({ index: 6 });
    // The other key's watcher is still waiting.
    expect(watch.size).toBe(1);
    expect(await settled(other)).toBe(false);
    source.set('other', { index: 3 });
    expect(await other).toEqual({ index: 3 });
    expect(watch.size).toBe(0);
  });

  it('a notice that changes nothing (same index) keeps the watcher waiting; a watcher of the new index is not woken', async () => {
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 4 });
    const onFour = watch.wait('k', 4, 10_000);
    await vi.waitFor(() => expect(watch.size).toBe(1));
    const readsBefore = source.reads;
    source.notify('k');
    await vi.waitFor(() => expect(source.reads).toBe(readsBefore + 1));
    expect(await settled(onFour)).toBe(false);
    expect(watch.size).toBe(1);
    source.set('k', { index: 5 });
    expect(await onFour).toEqual({ index: 5 });
    const onFive = watch.wait('k', 5, 10_000);
    await vi.waitFor(() => expect(watch.size).toBe(1));
    source.notify('k');
    expect(await settled(onFive)).toBe(false);
    source.set('k', { index: 7 });
    expect(await onFive).toEqual({ index: 7 });
  });

  it('answers after waitMs with the unchanged view (aged), not before', async () => {
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 2 });
    const started = performance.now();
    const view = await watch.wait('k', 2, 150);
    expect(performance.now() - started).toBeGreaterThanOrEqual(145);
    expect(view).toEqual({ index: 2, note: 'aged' });
    expect(watch.size).toBe(0);
    // A view that never changes by itself is read once: no polling while nothing is announced.
    expect(source.reads).toBe(1);
  });

  it('the answer after waitMs is the last view read, also when a notice brought a new one with the same index', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 2, endsInMs: 60_000 });
    const waiting = watch.wait('k', 2, 300);
    await vi.waitFor(() => expect(watch.size).toBe(1));
    // A renewal: the same index, a later end.
    source.set('k', { index: 2, endsInMs: 90_000 });
    await vi.waitFor(() => expect(source.reads).toBe(2));
    await vi.advanceTimersByTimeAsync(300);
    expect(await waiting).toEqual({ index: 2, endsInMs: 90_000, note: 'aged' });
  });

  it('a view that changes by itself (a lease ends, nothing announced) is read again then, and wakes its watchers', async () => {
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 2, endsInMs: 50 });
    const woken = watch.wait('k', 2, 10_000);
    await vi.waitFor(() => expect(watch.size).toBe(1));
    // The lease ends: the view changes with no notice.
    source.set('k', { index: 3 }, false);
    // Woken by the lease-end timer: the wait's own end would answer the old view.
    expect(await woken).toEqual({ index: 3 });
  });

  it('a lease-end of 0 ms or less is re-read after at least 1 ms, not in a loop', async () => {
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 2, endsInMs: -5 });
    const woken = watch.wait('k', 2, 10_000);
    await vi.waitFor(() => expect(watch.size).toBe(1));
    source.set('k', { index: 9 }, false);
    expect(await woken).toEqual({ index: 9 });
  });

  it('the lease-end timer follows the latest view: a renewal-like change moves it', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 2, endsInMs: 1_000 });
    const woken = watch.wait('k', 2, 60_000);
    await vi.waitFor(() => expect(watch.size).toBe(1));
    // A notice: the view now ends later (same index, so nobody is woken).
    source.set('k', { index: 2, endsInMs: 5_000 });
    await vi.waitFor(() => expect(source.reads).toBe(2));
    await vi.advanceTimersByTimeAsync(2_000);
    // The first timer (1 s) was replaced: no read at its end.
    expect(source.reads).toBe(2);
    source.set('k', { index: 3 }, false);
    await vi.advanceTimersByTimeAsync(3_100);
    expect(await woken).toEqual({ index: 3 });
    expect(source.reads).toBe(3);
  });

  it('the caller leaving ends its wait with its reason (or WaitAbortedError), and only its own', async () => {
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 2 });
    const a = new AbortController();
    const b = new AbortController();
    const stays = watch.wait('k', 2, 10_000);
    const leavesWithReason = watch.wait('k', 2, 10_000, a.signal);
    const leavesPlain = watch.wait('k', 2, 10_000, b.signal);
    await vi.waitFor(() => expect(watch.size).toBe(3));
    a.abort(new ShuttingDownError());
    await expect(leavesWithReason).rejects.toBeInstanceOf(ShuttingDownError);
    expect(watch.size).toBe(2);
    b.abort('gone');
    await expect(leavesPlain).rejects.toBeInstanceOf(WaitAbortedError);
    expect(watch.size).toBe(1);
    source.set('k', { index: 3 });
    expect(await stays).toEqual({ index: 3 });
    // A signal aborted before the wait ends it at once.
    await expect(watch.wait('k', 3, 10_000, AbortSignal.abort(new ShuttingDownError()))).rejects.toBeInstanceOf(ShuttingDownError);
    expect(watch.size).toBe(0);
  });

  it('a wait that ends normally stops listening to its signal', async () => {
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 2 });
    const caller = new AbortController();
    const removed = vi.spyOn(caller.signal, 'removeEventListener');
    const waiting = watch.wait('k', 2, 10_000, caller.signal);
    await vi.waitFor(() => expect(watch.size).toBe(1));
    source.set('k', { index: 3 });
    await waiting;
    expect(removed).toHaveBeenCalledWith('abort', expect.any(Function));
  });

  it('closeAll ends every wait with the given error and stops the lingering subscriptions', async () => {
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 2 });
    source.set('idle', { index: 2 });
    // A key nobody waits on any more: its subscription lingers.
    await watch.wait('idle', 1, 10_000);
    expect(source.listening('idle')).toBe(1);
    const waits = [watch.wait('k', 2, 10_000), watch.wait('k', 2, 10_000)];
    await vi.waitFor(() => expect(watch.size).toBe(2));
    const err = new ShuttingDownError();
    watch.closeAll(err);
    for (const w of waits) await expect(w).rejects.toBe(err);
    expect(watch.size).toBe(0);
    expect(source.listening('idle')).toBe(0);
    // The next wait subscribes afresh.
    const before = source.subscribes;
    await watch.wait('idle', 1, 10_000);
    expect(source.subscribes).toBe(before + 1);
  });

  it('a subscription outlives its last watcher by LINGER_MS: the next wait reuses it; after that it is stopped', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 2 });
    await watch.wait('k', 1, 10_000);
    expect(source.subscribes).toBe(1);
    await vi.advanceTimersByTimeAsync(LINGER_MS - 100);
    expect(source.stops).toBe(0);
    // Asked again within the linger: the same subscription, and its linger starts over when it ends.
    await watch.wait('k', 1, 10_000);
    expect(source.subscribes).toBe(1);
    await vi.advanceTimersByTimeAsync(LINGER_MS - 100);
    expect(source.stops).toBe(0);
    await vi.advanceTimersByTimeAsync(200);
    expect(source.stops).toBe(1);
    expect(source.listening('k')).toBe(0);
    await watch.wait('k', 1, 10_000);
    expect(source.subscribes).toBe(2);
  });

  it('a subscription is not dropped while a caller waits on it, however long', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 2 });
    // One caller's wait ended (a linger may start) while another's goes on past LINGER_MS.
    const long = watch.wait('k', 2, 4 * LINGER_MS);
    await vi.waitFor(() => expect(watch.size).toBe(1));
    await watch.wait('k', 1, 10_000);
    await vi.advanceTimersByTimeAsync(2 * LINGER_MS);
    expect(source.stops).toBe(0);
    source.set('k', { index: 3 });
    expect(await long).toEqual({ index: 3 });
  });

  it('a notice while nobody waits forgets the last view; the next caller reads afresh', async () => {
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 2, endsInMs: 60_000 });
    await watch.wait('k', 1, 10_000);
    source.set('k', { index: 3 });
    const reads = source.reads;
    expect(await watch.wait('k', 2, 10_000)).toEqual({ index: 3 });
    expect(source.reads).toBe(reads + 1);
  });

  it('callers arriving together share one read', async () => {
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 2 });
    let open!: () => void;
    source.readGate = new Promise<void>((r) => (open = r));
    const waits = Array.from({ length: 5 }, () => watch.wait('k', 1, 10_000));
    await vi.waitFor(() => expect(source.reads).toBe(1));
    await settled(Promise.resolve());
    open();
    for (const w of waits) expect(await w).toEqual({ index: 2 });
    expect(source.reads).toBe(1);
  });

  it('a caller arriving while a check reads shares that read, even when an older read settles meanwhile', async () => {
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 2 });
    let openFirst!: () => void;
    source.readGate = new Promise<void>((r) => (openFirst = r));
    const first = watch.wait('k', 2, 10_000);
    await vi.waitFor(() => expect(source.reads).toBe(1));
    // A change while the first caller's read is in flight: the check sends its own read.
    let openCheck!: () => void;
    source.readGate = new Promise<void>((r) => (openCheck = r));
    source.views.set('k', { index: 3 });
    source.notify('k');
    await vi.waitFor(() => expect(source.reads).toBe(2));
    openFirst();
    await settled(Promise.resolve());
    const second = watch.wait('k', 2, 10_000);
    await settled(Promise.resolve());
    expect(source.reads).toBe(2);
    openCheck();
    expect(await first).toEqual({ index: 3 });
    expect(await second).toEqual({ index: 3 });
    expect(source.reads).toBe(2);
  });

  it('a notice during a check reads once more after it, so a change it missed still wakes the watchers', async () => {
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 2 });
    const waiting = watch.wait('k', 2, 10_000);
    await vi.waitFor(() => expect(watch.size).toBe(1));
    let open!: () => void;
    source.readGate = new Promise<void>((r) => (open = r));
    const reads = source.reads;
    source.notify('k');
    await vi.waitFor(() => expect(source.reads).toBe(reads + 1));
    // The change lands while the check's read (of the old view) is in flight; its notice comes now.
    source.set('k', { index: 2 }, false);
    source.notify('k');
    source.views.set('k', { index: 5 });
    source.readGate = undefined;
    open();
    expect(await waiting).toEqual({ index: 5 });
    expect(source.reads).toBe(reads + 2);
  });

  it('a failed read during a check ends the waits with its error', async () => {
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 2 });
    const waits = [watch.wait('k', 2, 10_000), watch.wait('k', 2, 10_000)];
    await vi.waitFor(() => expect(watch.size).toBe(2));
    const err = new Error('store down');
    source.readError = err;
    source.notify('k');
    for (const w of waits) await expect(w).rejects.toBe(err);
    expect(watch.size).toBe(0);
    source.readError = undefined;
    source.set('k', { index: 3 });
    expect(await watch.wait('k', 2, 10_000)).toEqual({ index: 3 });
  });

  it('a failed subscription fails the wait, and the next wait subscribes again', async () => {
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 2 });
    source.subscribeError = new Error('no subscription');
    await expect(watch.wait('k', 2, 10_000)).rejects.toThrow('no subscription');
    source.subscribeError = undefined;
    const waiting = watch.wait('k', 2, 10_000);
    await vi.waitFor(() => expect(watch.size).toBe(1));
    expect(source.subscribes).toBe(2);
    source.set('k', { index: 3 });
    expect(await waiting).toEqual({ index: 3 });
  });

  it('a caller that leaves while the subscription is being made is answered once it is made, and the key is dropped after LINGER_MS', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    let open!: () => void;
    source.subscribeGate = new Promise<void>((r) => (open = r));
    const caller = new AbortController();
    const leaving = watch.wait('k', 1, 10_000, caller.signal);
    caller.abort(new WaitAbortedError());
    await vi.advanceTimersByTimeAsync(LINGER_MS + 100);
    // Nothing is dropped while the caller is still inside the wait.
    expect(source.stops).toBe(0);
    open();
    await expect(leaving).rejects.toBeInstanceOf(WaitAbortedError);
    expect(source.listening('k')).toBe(1);
    await vi.advanceTimersByTimeAsync(LINGER_MS + 100);
    expect(source.listening('k')).toBe(0);
    expect(source.stops).toBe(1);
  });
});

/** A store read returns the state as it was when the read was sent, however late its reply comes. */
class SnapshotSource extends TestSource {
  override async read(id: string): Promise<View> {
    this.reads++;
    const view = this.views.get(id) ?? { index: 1 };
    await this.readGate;
    return view;
  }
}

describe('ChangeWatch: an older state in flight', () => {
  it('a caller who knows a newer index than a read still in flight is not answered with that older state', async () => {
    const source = new SnapshotSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 2 });
    const first = watch.wait('k', 2, 10_000);
    expect(await settled(first)).toBe(false);
    // A change to 3: the check's read is sent, and its reply is held up.
    let open = () => {};
    source.readGate = new Promise<void>((r) => (open = r));
    source.set('k', { index: 3 });
    // Meanwhile the key moves on to 4, and a caller who already learned 4 (from another instance)
    // asks while the read of 3 is still in flight.
    source.set('k', { index: 4 });
    const caller = watch.wait('k', 4, 10_000);
    source.readGate = undefined;
    open();
    expect(await first).toEqual({ index: 3 });
    // Index 3 is older than what the caller knows: it keeps waiting on 4, not answered with 3.
    expect(await settled(caller)).toBe(false);
    source.set('k', { index: 5 });
    expect(await caller).toEqual({ index: 5 });
  });

  it("an index below the caller's that a read sent after the call confirms is the answer (an idle key starts again at 1)", async () => {
    const source = new SnapshotSource();
    const watch = new ChangeWatch(source);
    expect(await watch.wait('gone', 40, 10_000)).toEqual({ index: 1 });
    expect(source.reads).toBe(2);
  });
});

describe('ChangeWatch: coalesced immediate reads', () => {
  it('callers asking in one turn of the event loop share one read and get the same view object', async () => {
    const source = new SnapshotSource();
    const watch = new ChangeWatch(source, true);
    source.set('k', { index: 2 });
    const views = await Promise.all([watch.current('k'), watch.current('k'), watch.current('k'), watch.wait('k', 7, 0)]);
    expect(source.reads).toBe(1);
    expect(new Set(views).size).toBe(1);
    expect(views[0]).toEqual({ index: 2 });
    // Another key is read on its own.
    expect(await Promise.all([watch.current('k'), watch.current('other')])).toEqual([{ index: 2 }, { index: 1 }]);
    expect(source.reads).toBe(3);
  });

  it('a caller never shares a read that was sent before it asked: it sees every change completed before it', async () => {
    const source = new SnapshotSource();
    const watch = new ChangeWatch(source, true);
    source.set('k', { index: 2 });
    let open = () => {};
    source.readGate = new Promise<void>((r) => (open = r));
    const first = watch.current('k');
    // The first read is sent (after its turn), then the key changes, then a second caller asks.
    await new Promise((r) => setImmediate(r));
    expect(source.reads).toBe(1);
    source.set('k', { index: 3 });
    const second = watch.current('k');
    source.readGate = undefined;
    open();
    expect(await first).toEqual({ index: 2 });
    expect(await second).toEqual({ index: 3 });
    expect(source.reads).toBe(2);
  });

  it('a failed read fails every caller that shared it; the next caller reads again', async () => {
    const source = new SnapshotSource();
    const watch = new ChangeWatch(source, true);
    const failing = new TestSource();
    failing.readError = new Error('store down');
    const failingWatch = new ChangeWatch(failing, true);
    const both = [failingWatch.current('k'), failingWatch.current('k')];
    await expect(Promise.all(both)).rejects.toThrow('store down');
    await expect(both[1]).rejects.toThrow('store down');
    expect(failing.reads).toBe(1);
    failing.readError = undefined;
    expect(await failingWatch.current('k')).toEqual({ index: 1 });
    expect(failing.reads).toBe(2);
    // Without coalescing (the default), every caller reads.
    const plain = new ChangeWatch(source);
    await Promise.all([plain.current('k'), plain.current('k')]);
    expect(source.reads).toBe(2);
    expect(await watch.current('k')).toEqual({ index: 1 });
  });
});

describe('watch sources', () => {
  it('lock index: 2 x token while held, 2 x last token + 1 while free', () => {
    const state = { holder: null, waiters: 0, fencingToken: 21, expiresAtMs: 0, ttlRemainingMs: 0 };
    expect(lockIndex({ state, lastFencingToken: 21 })).toBe(42);
    expect(lockIndex({ state: null, lastFencingToken: 21 })).toBe(43);
    expect(lockIndex({ state: null, lastFencingToken: 0 })).toBe(1);
  });

  it("a lock's view changes by itself just after its lease's last millisecond; aged views count down from now", async () => {
    const now = Date.now();
    const state = { holder: 'h', waiters: 0, fencingToken: 5, expiresAtMs: now + 10_000, ttlRemainingMs: 700 };
    let subscribed = '';
    const source = lockWatchSource({
      watchChanges: async (id) => {
        subscribed = id;
        return () => undefined;
      },
      inspectIndexed: async () => ({ state, lastFencingToken: 5 }),
    });
    await source.watchChanges('x', () => undefined);
    expect(subscribed).toBe('x');
    const view = await source.read('x');
    expect(view.index).toBe(10);
    expect(source.changesByItselfInMs(view)).toBe(701);
    expect(source.changesByItselfInMs({ ...view, state: null })).toBeUndefined();
    const aged = source.aged(view);
    expect(aged.state?.ttlRemainingMs).toBeGreaterThan(9_000);
    expect(aged.state?.ttlRemainingMs).toBeLessThanOrEqual(10_000);
    expect(aged.state?.holder).toBe('h');
    expect(source.aged({ ...view, state: { ...state, expiresAtMs: now - 5_000 } }).state?.ttlRemainingMs).toBe(0);
    const free = { ...view, state: null };
    expect(source.aged(free)).toBe(free);
  });

  it("a semaphore's or rwlock's view changes by itself just after its earliest lease ends; aged views count down", async () => {
    const now = Date.now();
    const holder = (ttlRemainingMs: number, expiresAtMs: number): PermitHolder => ({
      holder: null,
      weight: 1,
      fencingToken: 1,
      expiresAtMs,
      ttlRemainingMs,
    });
    const calls: string[] = [];
    const port = {
      watchChanges: async (kind: string, id: string) => {
        calls.push(`watch ${kind} ${id}`);
        return () => undefined;
      },
      inspectIndexed: async (kind: string, id: string): Promise<IndexedPermitState> => {
        calls.push(`read ${kind} ${id}`);
        return {
          state: { capacity: 2, holders: [holder(900, now + 20_000), holder(300, now + 10_000)], holderCount: 2, waiters: 0 },
          index: 8,
        };
      },
    } as unknown as LeaseStore;
    const source = permitWatchSource(port, 'rwlock');
    await source.watchChanges('x', () => undefined);
    const view = await source.read('x');
    expect(calls).toEqual(['watch rwlock x', 'read rwlock x']);
    expect(source.changesByItselfInMs(view)).toBe(301);
    expect(source.changesByItselfInMs({ index: 1, state: null })).toBeUndefined();
    expect(source.changesByItselfInMs({ index: 1, state: { capacity: 1, holders: [], holderCount: 0, waiters: 0 } })).toBeUndefined();
    const aged = source.aged(view);
    const left = aged.state?.holders.map((h) => h.ttlRemainingMs) ?? [];
    expect(left[0]).toBeGreaterThan(19_000);
    expect(left[0]).toBeLessThanOrEqual(20_000);
    expect(left[1]).toBeGreaterThan(9_000);
    expect(left[1]).toBeLessThanOrEqual(10_000);
    expect(aged.state?.capacity).toBe(2);
    expect(aged.index).toBe(8);
    const past = source.aged({ index: 3, state: { capacity: 1, holders: [holder(5, now - 1_000)], holderCount: 1, waiters: 0 } });
    expect(past.state?.holders[0]?.ttlRemainingMs).toBe(0);
    const free = { index: 3, state: null };
    expect(source.aged(free)).toBe(free);
  });
});
