import { afterEach, describe, expect, it, vi } from 'vitest';
import { WatchMarks } from '../../src/store/redis/watch-marks.js';

/**
 * WatchMarks keeps the watched locks marked in Redis by running watch-mark.lua again every `refreshMs`.
 * Here the mark is a plain function standing for that script (the class takes it as a parameter), so
 * the renewal rules are checked without any Redis: renewed while watched, no longer once deleted or
 * closed, and a lapsed mark has the lock read again only if it is still watched by the same listener.
 */

const REFRESH_MS = 5;

/** The mark function: records each call; answers "still marked" unless told otherwise, or waits. */
class MarkLog {
  readonly calls: string[] = [];
  answer: boolean | 'wait' = true;
  private readonly waiting: ((wasMarked: boolean) => void)[] = [];

  readonly mark = (id: string): Promise<boolean> => {
    this.calls.push(id);
    if (this.answer === 'wait') return new Promise((resolve) => this.waiting.push(resolve));
    return Promise.resolve(this.answer);
  };

  count(id: string): number {
    return this.calls.filter((c) => c === id).length;
  }

  /** Answers every renewal still waiting. */
  answerWaiting(wasMarked: boolean): void {
    for (const resolve of this.waiting.splice(0)) resolve(wasMarked);
  }

  get waitingCount(): number {
    return this.waiting.length;
  }
}

/** Polls `done` until it holds: the interval timer runs when the machine gets to it, not on a schedule. */
async function until(done: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

/** Lets several refresh periods pass (for checks that something did NOT happen). */
const idle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, REFRESH_MS * 10));

const open: WatchMarks[] = [];
function watchMarks(log: MarkLog, random?: () => number): WatchMarks {
  const marks = new WatchMarks(log.mark, REFRESH_MS, random);
  open.push(marks);
  return marks;
}

afterEach(() => {
  for (const marks of open.splice(0)) marks.close();
});

describe('WatchMarks: keeping watched locks marked', () => {
  it('marks a lock before add resolves, then renews the mark while the lock is watched', async () => {
    const log = new MarkLog();
    const marks = watchMarks(log);
    await marks.add('a', () => undefined);
    expect(log.calls).toEqual(['a']);
    await until(() => log.count('a') >= 3, 'the mark of a renewed twice');
  });

  it('renews every watched lock, and keeps renewing the others when one is no longer watched', async () => {
    const log = new MarkLog();
    const marks = watchMarks(log);
    await marks.add('a', () => undefined);
    await marks.add('b', () => undefined);
    await until(() => log.count('a') >= 2 && log.count('b') >= 2, 'both marks renewed');
    marks.delete('a');
    const aAfterDelete = log.count('a');
    const b = log.count('b');
    await until(() => log.count('b') >= b + 3, 'b still renewed after a was deleted');
    expect(log.count('a')).toBe(aAfterDelete);
  });

  it('stops renewing once the last lock is deleted, and starts again on the next add', async () => {
    const log = new MarkLog();
    const marks = watchMarks(log);
    await marks.add('a', () => undefined);
    await until(() => log.count('a') >= 2, 'the mark of a renewed');
    marks.delete('a');
    const total = log.calls.length;
    await idle();
    expect(log.calls.length).toBe(total);
    await marks.add('c', () => undefined);
    const c = log.count('c');
    await until(() => log.count('c') >= c + 2, 'c renewed after a new add');
  });

  it('close stops every renewal, even with several adds made (one timer for all, not one per add)', async () => {
    const log = new MarkLog();
    const marks = watchMarks(log);
    await marks.add('a', () => undefined);
    await marks.add('b', () => undefined);
    await marks.add('c', () => undefined);
    await until(() => log.count('c') >= 2, 'the marks renewed');
    marks.close();
    // A renewal already started when close ran may still be recorded: count after it settled.
    await new Promise((resolve) => setTimeout(resolve, 0));
    const total = log.calls.length;
    await idle();
    expect(log.calls.length).toBe(total);
  });

  it('a renewal that finds the mark still there tells nobody; one that finds it run out has the lock read again', async () => {
    const log = new MarkLog();
    const marks = watchMarks(log);
    const lapses: string[] = [];
    await marks.add('a', () => lapses.push('a'));
    await until(() => log.count('a') >= 4, 'the mark of a renewed several times');
    expect(lapses).toEqual([]);
    log.answer = false;
    await until(() => lapses.length >= 1, 'a told its mark lapsed');
    expect(new Set(lapses)).toEqual(new Set(['a']));
  });

  it('a lapse found for a lock deleted meanwhile is not reported to its old listener', async () => {
    // The clock and the pass timer stand still until advanced: both marks fall due at one instant, so one
    // pass renews both and both renewals are under way at once. On the real clock a pass (every 1 ms here)
    // could fall between the two adds' due times on a slow run; it then waited on a's renewal alone and
    // keep's never started.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'performance'] });
    try {
      const log = new MarkLog();
      const marks = watchMarks(log, () => 0.5);
      const lapses: string[] = [];
      await marks.add('a', () => lapses.push('a: first'));
      await marks.add('keep', () => lapses.push('keep'));
      log.answer = 'wait';
      // Async: each pass's bookkeeping (a microtask) settles before the next pass is due.
      await vi.advanceTimersByTimeAsync(REFRESH_MS);
      await until(() => log.waitingCount >= 2, 'renewals of a and keep under way');
      marks.delete('a');
      log.answerWaiting(false);
      await until(() => lapses.includes('keep'), 'keep told its mark lapsed');
      expect(lapses).not.toContain('a: first');
    } finally {
      vi.useRealTimers();
    }
  });

  it('a renewal that fails (Redis unreachable) tells nobody and renewing goes on', async () => {
    const failing = new MarkLog();
    let calls = 0;
    const lapses: string[] = [];
    const marks = new WatchMarks(async (id) => {
      calls++;
      if (calls > 1) throw new Error('connection lost');
      return failing.mark(id);
    }, REFRESH_MS);
    open.push(marks);
    await marks.add('a', () => lapses.push('a'));
    await until(() => calls >= 4, 'renewals tried after failures');
    expect(lapses).toEqual([]);
  });

  it('marks added together are renewed spread over the period, each once per period, never all in one pass', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'setTimeout', 'clearTimeout', 'performance'] });
    try {
      const period = 10_000;
      const log = new MarkLog();
      const marks = new WatchMarks(log.mark, period);
      open.push(marks);
      const ids = Array.from({ length: 100 }, (_v, i) => `lock-${i}`);
      for (const id of ids) await marks.add(id, () => undefined);
      log.calls.length = 0;
      // A pass runs every tenth of the period: the renewals each pass made, over two periods.
      const perPass: number[] = [];
      for (let pass = 0; pass < 20; pass++) {
        const before = log.calls.length;
        await vi.advanceTimersByTimeAsync(period / 10);
        perPass.push(log.calls.length - before);
      }
      // 100 marks over 10 passes: ~10 a pass (30 or more in one pass is a chance below one in a million).
      expect(Math.max(...perPass)).toBeLessThan(30);
      // Every mark renewed once in each period, none skipped nor renewed twice.
      for (const id of ids) expect(log.count(id)).toBe(2);
    } finally {
      vi.useRealTimers();
    }
  });
});
