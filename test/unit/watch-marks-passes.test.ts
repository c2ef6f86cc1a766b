import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { WatchMarks } from '../../src/store/redis/watch-marks.js';

/**
 * When WatchMarks renews each mark, on a clock and a pass timer that stand still until advanced: a pass
 * runs every REFRESH_MS / 10 and renews the marks due by then, each in its own turn once per REFRESH_MS;
 * a pass still waiting on Redis is not overlapped by the next; renewals (and markAll's marks) go out at
 * most 32 at a time, so another caller's command never queues behind more. These rules keep the
 * renewal load spread and bounded while every watched lock stays marked.
 */

const REFRESH_MS = 100;
const PASS_MS = REFRESH_MS / 10;
const BATCH = 32;

/** The mark function: records each call; answers "still marked", or waits for ids held, or fails. */
class MarkLog {
  readonly calls: string[] = [];
  answer: boolean | 'fail' = true;
  /** Ids whose marks wait until answered (answerWaiting). */
  readonly held = new Set<string>();
  holdAll = false;
  private readonly waiting: ((wasMarked: boolean) => void)[] = [];

  readonly mark = (id: string): Promise<boolean> => {
    this.calls.push(id);
    if (this.holdAll || this.held.has(id)) return new Promise((resolve) => this.waiting.push(resolve));
    if (this.answer === 'fail') return Promise.reject(new Error('connection lost'));
    return Promise.resolve(this.answer);
  };

  count(id: string): number {
    return this.calls.filter((c) => c === id).length;
  }

  answerWaiting(wasMarked: boolean): void {
    for (const resolve of this.waiting.splice(0)) resolve(wasMarked);
  }

  get waitingCount(): number {
    return this.waiting.length;
  }
}

/** Lets every promise settled so far run its callbacks (one turn of the real event loop). */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Advances the fake clock to `ms` after the marks were added (passes run at each PASS_MS). */
let now = 0;
async function advanceTo(ms: number): Promise<void> {
  await vi.advanceTimersByTimeAsync(ms - now);
  now = ms;
  await settle();
}

const open: WatchMarks[] = [];
/** WatchMarks whose marks' first turns are `firsts` (fractions of REFRESH_MS), in the order added. */
function watchMarks(log: MarkLog, firsts: number[] = []): WatchMarks {
  const queue = [...firsts];
  const marks = new WatchMarks(log.mark, REFRESH_MS, () => queue.shift() ?? 0);
  open.push(marks);
  return marks;
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'performance'] });
  now = 0;
});

afterEach(() => {
  for (const marks of open.splice(0)) marks.close();
  vi.useRealTimers();
});

describe('WatchMarks: renewal passes', () => {
  it('renews a mark at the pass at its due time, then once per period in the same turn', async () => {
    const log = new MarkLog();
    const marks = watchMarks(log, [0.1]);
    await marks.add('a', () => undefined);
    // Due at PASS_MS exactly: the first pass renews it.
    await advanceTo(PASS_MS);
    expect(log.count('a')).toBe(2);
    await advanceTo(PASS_MS + REFRESH_MS - PASS_MS);
    expect(log.count('a')).toBe(2);
    await advanceTo(PASS_MS + REFRESH_MS);
    expect(log.count('a')).toBe(3);
  });

  it('a pass still waiting on Redis is not overlapped; a mark it held up keeps its own turn', async () => {
    const log = new MarkLog();
    const marks = watchMarks(log, [0, 0.5]);
    await marks.add('slow', () => undefined);
    await marks.add('b', () => undefined);
    log.held.add('slow');
    await advanceTo(10);
    expect(log.waitingCount).toBe(1);
    // b fell due at 50, but the pass of 10 still waits: no pass runs meanwhile.
    await advanceTo(75);
    expect(log.count('slow')).toBe(2);
    expect(log.count('b')).toBe(1);
    log.held.clear();
    log.answerWaiting(true);
    await settle();
    await advanceTo(80);
    expect(log.count('b')).toBe(2);
    // Its next turn is a period after its own time (50), not after the late pass (80).
    await advanceTo(140);
    expect(log.count('b')).toBe(2);
    await advanceTo(150);
    expect(log.count('b')).toBe(3);
  });

  it('a mark whose pass came a whole period late starts its turn again from that pass', async () => {
    const log = new MarkLog();
    const marks = watchMarks(log, [0, 0.5]);
    await marks.add('slow', () => undefined);
    await marks.add('b', () => undefined);
    log.held.add('slow');
    await advanceTo(10);
    await advanceTo(145);
    log.held.clear();
    log.answerWaiting(true);
    await settle();
    // b was due at 50; its turn a period later (150) is this very pass: renewed once, next at 250.
    await advanceTo(150);
    expect(log.count('b')).toBe(2);
    await advanceTo(240);
    expect(log.count('b')).toBe(2);
    await advanceTo(250);
    expect(log.count('b')).toBe(3);
  });

  it('renews at most 32 marks at once: the rest of a pass waits for them', async () => {
    const log = new MarkLog();
    const marks = watchMarks(log);
    const ids = Array.from({ length: BATCH + 8 }, (_v, i) => `lock-${i}`);
    for (const id of ids) await marks.add(id, () => undefined);
    log.holdAll = true;
    await advanceTo(PASS_MS);
    expect(log.waitingCount).toBe(BATCH);
    log.answerWaiting(true);
    await settle();
    expect(log.waitingCount).toBe(8);
    log.answerWaiting(true);
    await settle();
    for (const id of ids) expect(log.count(id), id).toBe(2);
  });

  it('runs one timer while anything is watched, and none once the last lock is deleted', async () => {
    const log = new MarkLog();
    const marks = watchMarks(log);
    await marks.add('a', () => undefined);
    await marks.add('b', () => undefined);
    expect(vi.getTimerCount()).toBe(1);
    marks.delete('a');
    expect(vi.getTimerCount()).toBe(1);
    marks.delete('b');
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('WatchMarks: markAll', () => {
  it('marks every watched lock again at once, 32 at a time, each once', async () => {
    const log = new MarkLog();
    const marks = watchMarks(log);
    const ids = Array.from({ length: BATCH + 8 }, (_v, i) => `lock-${i}`);
    // The pass timer stands still here: every mark below is markAll's.
    for (const id of ids) await marks.add(id, () => undefined);
    log.calls.length = 0;
    log.holdAll = true;
    const done = marks.markAll();
    await settle();
    expect(log.waitingCount).toBe(BATCH);
    log.answerWaiting(true);
    await settle();
    expect(log.waitingCount).toBe(8);
    log.answerWaiting(true);
    await done;
    expect([...log.calls].sort()).toEqual([...ids].sort());
  });

  it('a mark it could not set is renewed at the next pass, which has the lock read again if the mark ran out', async () => {
    const log = new MarkLog();
    const marks = watchMarks(log, [0.99]);
    const lapses: string[] = [];
    await marks.add('a', () => lapses.push('a'));
    log.answer = 'fail';
    await marks.markAll();
    expect(log.count('a')).toBe(2);
    // Its own turn is near the end of the period; the failed mark brings it to the next pass.
    log.answer = false;
    await advanceTo(PASS_MS);
    expect(log.count('a')).toBe(3);
    expect(lapses).toEqual(['a']);
  });
});
