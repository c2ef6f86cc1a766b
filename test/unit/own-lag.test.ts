import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it, vi } from 'vitest';

/**
 * How long this process's own event loop was held up within a span (src/domain/own-lag.ts), which the
 * late-grant guard uses to tell "this instance was slow" (503 overloaded) from "the store was slow"
 * (503 store_unavailable). The clock and the sampling timer are the test's: `tick(t)` is the sampling
 * timer running at time t, which it does late (never early) when the loop was held up.
 *
 * Each test gets its own copy of the module: the real one is a process-wide singleton that other tests
 * in the same worker may have started already.
 */
async function freshLag() {
  vi.resetModules();
  const { ownLag } = await import('../../src/domain/own-lag.js');
  let now = 1_000;
  let sample: (() => void) | undefined;
  let timersStarted = 0;
  vi.spyOn(performance, 'now').mockImplementation(() => now);
  vi.spyOn(globalThis, 'setInterval').mockImplementation(((fn: () => void) => {
    sample = fn;
    timersStarted++;
    return { unref: () => undefined };
  }) as unknown as typeof setInterval);
  return {
    ownLag,
    timersStarted: () => timersStarted,
    at(t: number) {
      now = t;
    },
    /** The sampling timer runs at `t`. */
    tick(t: number) {
      now = t;
      sample?.();
    },
  };
}

afterEach(() => {
  vi.restoreAllMocks();
  // The copies made here were built on the test's clock and timer: no later file may import them (the
  // mutation run shares one module cache between files).
  vi.resetModules();
});

describe('own event loop lag', () => {
  it('on first use it starts sampling and knows of no hold-up before that', async () => {
    const lag = await freshLag();
    lag.at(5_000);
    expect(lag.ownLag.heldUpBetween(0, 5_000)).toBe(0);
    // From then on it samples: a 100 ms stall (the timer due at 5010 ran at 5110) is counted.
    lag.tick(5_110);
    lag.at(5_115);
    expect(lag.ownLag.heldUpBetween(5_000, 5_115)).toBe(100);
  });

  it('watch() starts sampling at once, and only once', async () => {
    const lag = await freshLag();
    lag.ownLag.watch();
    lag.tick(1_100); // due at 1010: 90 ms late
    lag.at(1_105);
    expect(lag.ownLag.heldUpBetween(1_000, 1_105)).toBe(90);
    // A second watch() while a stall is going on does not restart the sampling (and forget the stall).
    lag.at(1_160); // due at 1110: 50 ms overdue
    lag.ownLag.watch();
    expect(lag.ownLag.heldUpBetween(1_100, 1_160)).toBe(50);
    expect(lag.timersStarted()).toBe(1);
  });

  it('counts only the part of a stall that falls inside the span', async () => {
    const lag = await freshLag();
    lag.ownLag.watch();
    lag.tick(1_110); // due at 1010: a stall from 1010 to 1110 (100 ms)
    lag.at(1_115);
    expect(lag.ownLag.heldUpBetween(1_000, 1_115)).toBe(100);
    expect(lag.ownLag.heldUpBetween(1_060, 1_115)).toBe(50);
    expect(lag.ownLag.heldUpBetween(1_000, 1_060)).toBe(50);
    expect(lag.ownLag.heldUpBetween(1_000, 1_010)).toBe(0);
    expect(lag.ownLag.heldUpBetween(1_110, 1_115)).toBe(0);
  });

  it('lateness up to 20 ms is jitter, not a stall', async () => {
    const lag = await freshLag();
    lag.ownLag.watch();
    lag.tick(1_030); // due at 1010: 20 ms late, jitter
    lag.tick(1_061); // due at 1040: 21 ms late, a stall
    lag.tick(1_075); // due at 1071: 4 ms late, jitter
    lag.at(1_076);
    expect(lag.ownLag.heldUpBetween(1_000, 1_076)).toBe(21);
  });

  it('counts a stall still going on (the sampling timer overdue) once it is past the jitter allowance', async () => {
    const lag = await freshLag();
    lag.ownLag.watch(); // due at 1010
    expect(lag.ownLag.heldUpBetween(1_000, 1_030)).toBe(0);
    expect(lag.ownLag.heldUpBetween(1_000, 1_031)).toBe(21);
    // Overdue since before the span began: only the span's part of it.
    expect(lag.ownLag.heldUpBetween(1_020, 1_050)).toBe(30);
  });

  it('adds up every stall in the span, and remembers the last 512', async () => {
    const lag = await freshLag();
    lag.ownLag.watch();
    let t = 1_000;
    const stall = () => {
      t += 40; // due 10 ms after the last run, run 40 ms after it: 30 ms late
      lag.tick(t);
    };
    stall();
    stall();
    lag.at(t + 1);
    expect(lag.ownLag.heldUpBetween(1_000, t + 1)).toBe(60);
    for (let i = 0; i < 511; i++) stall();
    lag.at(t + 1);
    // 513 stalls of 30 ms: the first one is forgotten.
    expect(lag.ownLag.heldUpBetween(1_000, t + 1)).toBe(512 * 30);
  });
});
