import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ChangeWatch, LINGER_MS, WAKE_TURN_BUDGET_MS } from '../../src/domain/watch.js';
import { settled, TestSource } from '../helpers/driven-watch-source.js';

/**
 * How a key's blocking queries keep their one subscription, their one lease-end timer and their reads
 * in step with the callers: a change nothing announced that a caller's read finds wakes the watchers
 * behind it; a read that finds nothing new moves no timer; notices during a check cost one more read,
 * not one each; a watcher that left during a pass is not answered; a pass ends at the answer that spent
 * its budget; and a subscription lingers LINGER_MS after the last wait on it ends. Over a source the
 * test drives, as in watch.test.ts.
 */

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe('a change nothing announced', () => {
  it("found by a caller's read, wakes the watchers still at the older index at once", async () => {
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 2 });
    const behind = watch.wait('k', 2, 10_000);
    expect(await settled(behind)).toBe(false);
    // The lease ended (nothing is written then), and a caller who already saw the free key asks.
    source.set('k', { index: 3 }, false);
    const caller = watch.wait('k', 3, 10_000);
    expect(await behind).toEqual({ index: 3 });
    expect(await settled(caller)).toBe(false);
    source.set('k', { index: 4 });
    expect(await caller).toEqual({ index: 4 });
  });

  it("a caller's read that finds the view changed only in what no watcher waits on costs no further read", async () => {
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 2 });
    const first = watch.wait('k', 2, 10_000);
    expect(await settled(first)).toBe(false);
    // Renewed (not a change: the index stays).
    source.set('k', { index: 2, note: 'renewed' }, false);
    const second = watch.wait('k', 2, 10_000);
    expect(await settled(second)).toBe(false);
    expect(source.reads).toBe(2);
    source.set('k', { index: 3 });
    expect(await first).toEqual({ index: 3 });
    expect(await second).toEqual({ index: 3 });
  });

  it("a caller's read that finds the very view the watch holds leaves the lease-end timer where it was", async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    // The lease ends 100 ms after the first read.
    source.set('k', { index: 2, endsInMs: 100 });
    const first = watch.wait('k', 2, 10_000);
    expect(await settled(first)).toBe(false);
    await vi.advanceTimersByTimeAsync(50);
    const second = watch.wait('k', 2, 10_000);
    expect(await settled(second)).toBe(false);
    await vi.advanceTimersByTimeAsync(10);
    source.set('k', { index: 3 }, false);
    // Read again when the lease ends, not 100 ms after the second caller came.
    await vi.advanceTimersByTimeAsync(41);
    expect(await settled(first)).toBe(true);
    expect(await first).toEqual({ index: 3 });
    expect(await second).toEqual({ index: 3 });
  });
});

describe('a check of the watchers', () => {
  it('notices that arrive while it reads cost one more read after it, not one each', async () => {
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 2 });
    const waiting = watch.wait('k', 2, 10_000);
    expect(await settled(waiting)).toBe(false);
    let open = () => {};
    source.readGate = new Promise<void>((r) => (open = r));
    source.set('k', { index: 3 });
    expect(source.reads).toBe(2);
    for (let i = 0; i < 5; i++) source.notify('k');
    await settled(Promise.resolve());
    expect(source.reads).toBe(2);
    source.readGate = undefined;
    open();
    expect(await waiting).toEqual({ index: 3 });
    await settled(Promise.resolve());
    expect(source.reads).toBe(3);
  });

  it('answers every watcher in one pass while the budget lasts; a watcher that left during the pass is not answered', async () => {
    // The clock stands still (at a time other than 0): the pass's budget never runs out.
    vi.spyOn(performance, 'now').mockReturnValue(1_000);
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 2 });
    const events: string[] = [];
    const leaver = new AbortController();
    const wait = (name: string, signal?: AbortSignal) =>
      watch
        .wait('k', 2, 10_000, signal, () => {
          events.push(`change ${name}`);
          // The first answer makes another watcher's caller leave.
          if (name === 'a') leaver.abort(new Error('left'));
        })
        .then(
          () => events.push(`settled ${name}`),
          (err: unknown) => events.push(`rejected ${name} ${(err as Error).message}`),
        );
    const waits = [wait('a'), wait('b', leaver.signal), wait('c')];
    await vi.waitFor(() => expect(watch.size).toBe(3));
    source.set('k', { index: 3 });
    await Promise.all(waits);
    expect(events.slice(0, 2)).toStrictEqual(['change a', 'change c']);
    expect(events.slice(2).sort()).toStrictEqual(['rejected b left', 'settled a', 'settled c']);
  });

  it('ends a turn at the answer that spent its budget: the next watcher is answered in a later turn', async () => {
    // Each reading of the clock is one budget after the last: every answer spends it.
    let now = 0;
    vi.spyOn(performance, 'now').mockImplementation(() => (now += WAKE_TURN_BUDGET_MS));
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 2 });
    const events: string[] = [];
    const waits = ['a', 'b'].map((name) =>
      watch.wait('k', 2, 10_000, undefined, () => events.push(`change ${name}`)).then(() => events.push(`settled ${name}`)),
    );
    await vi.waitFor(() => expect(watch.size).toBe(2));
    source.set('k', { index: 3 });
    await Promise.all(waits);
    expect(events).toStrictEqual(['change a', 'settled a', 'change b', 'settled b']);
  });
});

describe("a key's subscription", () => {
  it('lingers LINGER_MS after the last wait on it ends, not after an earlier one', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const source = new TestSource();
    const watch = new ChangeWatch(source);
    source.set('k', { index: 2 });
    const long = watch.wait('k', 2, 10 * LINGER_MS);
    expect(await settled(long)).toBe(false);
    // Another caller's wait ends at once while the long one goes on.
    expect(await watch.wait('k', 1, 10_000)).toEqual({ index: 2 });
    await vi.advanceTimersByTimeAsync(LINGER_MS / 2);
    source.set('k', { index: 3 });
    expect(await long).toEqual({ index: 3 });
    await vi.advanceTimersByTimeAsync(LINGER_MS - 100);
    expect(source.stops).toBe(0);
    await vi.advanceTimersByTimeAsync(200);
    expect(source.stops).toBe(1);
  });
});
