import { describe, expect, it, onTestFinished, vi } from 'vitest';
import { performance } from 'node:perf_hooks';
import { ChangeWatch, WAKE_TURN_BUDGET_MS, type WatchSource } from '../../src/domain/watch.js';

/**
 * ChangeWatch.wait's onChange: called for every watcher a change wakes, all in the one pass that
 * wakes them and before any wait's promise settles; not for an answer at once; a throw rejects only
 * that wait. A source in memory, so only the watch's own order is tested.
 */
function source(): { watch: ChangeWatch<{ index: number }>; change: (index: number) => void } {
  let view = { index: 1 };
  let notify: (() => void) | undefined;
  const src: WatchSource<{ index: number }> = {
    watchChanges: async (_id, onChange) => {
      notify = onChange;
      return () => undefined;
    },
    read: async () => view,
    changesByItselfInMs: () => undefined,
    aged: (v) => v,
  };
  const watch = new ChangeWatch(src);
  return {
    watch,
    change: (index) => {
      view = { index };
      notify?.();
    },
  };
}

describe('ChangeWatch onChange', () => {
  it('answers every woken watcher in one pass, before any wait settles; a throw rejects that wait only', async () => {
    // One pass whatever the host's load: the pass's time budget (WAKE_TURN_BUDGET_MS, read on
    // performance.now) never runs out here. A busy host otherwise split these three answers over two
    // turns (the thrown error's stack alone can take the 1 ms), which is the budget working, not this
    // ordering failing.
    const clock = vi.spyOn(performance, 'now').mockReturnValue(0);
    onTestFinished(() => clock.mockRestore());
    const { watch, change } = source();
    const events: string[] = [];
    const waits = [0, 1, 2].map((i) =>
      watch
        .wait('k', 1, 10_000, undefined, (view) => {
          events.push(`change ${i} ${view.index}`);
          if (i === 1) throw new Error('could not answer');
        })
        .then(
          (view) => events.push(`settled ${i} ${view.index}`),
          (err: unknown) => events.push(`rejected ${i} ${(err as Error).message}`),
        ),
    );
    await expect.poll(() => watch.size).toBe(3);
    change(2);
    await Promise.all(waits);
    expect(events.slice(0, 3)).toEqual(['change 0 2', 'change 1 2', 'change 2 2']);
    expect(events.slice(3).sort()).toEqual(['rejected 1 could not answer', 'settled 0 2', 'settled 2 2']);
    expect(watch.size).toBe(0);
  });

  it('is not called for an answer at once or after waitMs', async () => {
    const { watch } = source();
    const calls: number[] = [];
    expect((await watch.wait('k', 7, 10_000, undefined, (v) => calls.push(v.index))).index).toBe(1);
    expect((await watch.wait('k', 1, 20, undefined, (v) => calls.push(v.index))).index).toBe(1);
    expect(calls).toEqual([]);
  });

  it('answers many watchers in turns of a time budget, serving the event loop between them; one that left meanwhile is not answered again', async () => {
    const { watch, change } = source();
    const count = 101;
    // Each answer takes this long (busy), so a turn's budget is spent after answersPerTurn of them, or
    // sooner if this process is put off the CPU meanwhile: a turn never answers more.
    const answerMs = 0.4;
    const answersPerTurn = Math.ceil(WAKE_TURN_BUDGET_MS / answerMs);
    let answered = 0;
    let answeredWhenOtherWorkRan: number | undefined;
    const aborts = new AbortController();
    const waits = Array.from({ length: count }, (_, i) =>
      watch
        .wait('k', 1, 10_000, i === count - 1 ? aborts.signal : undefined, () => {
          const until = performance.now() + answerMs;
          while (performance.now() < until);
          answered++;
          if (i === 0) {
            // Other work queued when the first answer is made: it must run before the last answer.
            setImmediate(() => {
              answeredWhenOtherWorkRan = answered;
              aborts.abort(new Error('left'));
            });
          }
        })
        .then(
          (view) => `settled ${view.index}`,
          (err: unknown) => `rejected ${(err as Error).message}`,
        ),
    );
    await expect.poll(() => watch.size).toBe(count);
    change(2);
    const outcomes = await Promise.all(waits);
    expect(answeredWhenOtherWorkRan).toBeGreaterThanOrEqual(1);
    expect(answeredWhenOtherWorkRan).toBeLessThanOrEqual(answersPerTurn);
    expect(answered).toBe(count - 1);
    expect(outcomes.slice(0, -1).every((o) => o === 'settled 2')).toBe(true);
    expect(outcomes.at(-1)).toBe('rejected left');
    expect(watch.size).toBe(0);
  });

  it('rests between two turns: work queued by the work that ran after a turn (a read whose store call is written at the end of its own turn) runs before the next turn', async () => {
    const { watch, change } = source();
    const count = 40;
    const answerMs = 0.4;
    const answersPerTurn = Math.ceil(WAKE_TURN_BUDGET_MS / answerMs);
    let answered = 0;
    let answeredWhenQueuedWorkRan: number | undefined;
    const waits = Array.from({ length: count }, (_, i) =>
      watch.wait('k', 1, 10_000, undefined, () => {
        const until = performance.now() + answerMs;
        while (performance.now() < until);
        answered++;
        // Work that runs after this turn and queues more for the end of its own turn: the second step
        // must run before the next turn too, not after it.
        if (i === 0) setImmediate(() => setImmediate(() => (answeredWhenQueuedWorkRan = answered)));
      }),
    );
    await expect.poll(() => watch.size).toBe(count);
    change(2);
    await Promise.all(waits);
    expect(answered).toBe(count);
    expect(answeredWhenQueuedWorkRan).toBeGreaterThanOrEqual(1);
    expect(answeredWhenQueuedWorkRan).toBeLessThanOrEqual(answersPerTurn);
  });
});
