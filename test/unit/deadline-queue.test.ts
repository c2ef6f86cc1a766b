import { performance } from 'node:perf_hooks';
import { afterEach, expect, it, vi } from 'vitest';
import { armDeadline } from '../../src/store/redis/command-deadline.js';

/**
 * The shared deadline queue (command-deadline.ts) after it drops its judged part (more than 1,024
 * entries, most of the queue): a command still in flight is judged at its own deadline, not at the
 * deadline of a command sent after it. On a fake clock (timers and performance.now), so the process's
 * own lateness, which moves a verdict back on purpose, plays no part. (test/redis/command-deadline.test.ts
 * checks on the real clock that none is judged before its deadline.)
 */

afterEach(() => {
  vi.restoreAllMocks();
  vi.useRealTimers();
});

/** A command the test answers or leaves unanswered; `at` is when it was rejected. */
function command() {
  const entry = {
    isResolved: false,
    at: undefined as number | undefined,
    reject: () => {
      entry.at = performance.now();
      entry.isResolved = true;
    },
  };
  return entry;
}

it('a command in flight when the queue drops its judged part is rejected at its own deadline', async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'Date'] });
  vi.spyOn(performance, 'now').mockImplementation(() => Date.now());
  // A timeout no other test uses: a queue of its own.
  const timeoutMs = 1_537;
  // 1,100 commands answered at once: judged (and dropped) at the first check.
  for (let i = 0; i < 1_100; i++) {
    const answered = command();
    armDeadline(answered, timeoutMs);
    answered.isResolved = true;
  }
  await vi.advanceTimersByTimeAsync(20);
  const early = command();
  const earlySentAt = performance.now();
  armDeadline(early, timeoutMs);
  // Sent before the early one's deadline: its own comes 1.4 s after that one.
  await vi.advanceTimersByTimeAsync(1_400);
  const late = command();
  armDeadline(late, timeoutMs);
  await vi.advanceTimersByTimeAsync(timeoutMs);
  // The early one's deadline, plus the shared check's coalescing (10 ms) and a turn of the (fake) loop;
  // nowhere near the late one's, 1.4 s on.
  expect(early.at).toBeGreaterThanOrEqual(earlySentAt + timeoutMs);
  expect(early.at).toBeLessThanOrEqual(earlySentAt + timeoutMs + 20);
  expect(late.at).toBeUndefined();
  await vi.advanceTimersByTimeAsync(timeoutMs);
  expect(late.at).toBeDefined();
});
