import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { TurnPacer } from '../../src/http/turn-pacer.js';

/**
 * The turn pacer: past a slice of one turn, the rest of a burst is held and started in later turns,
 * about a slice a turn, so that what the loop does between turns (reading the probes: a timer here)
 * comes after a few of the burst's requests, not after all of them.
 */

const SLICE_MS = 20;
/** Each request's work: 100 of them are 500 ms, 25 slices. */
const COST_MS = 5;
const REQUESTS = 100;

function spin(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // The request's own work.
  }
}

/**
 * 100 requests arrive in one turn; each one's work runs as a request's does after its start: in the
 * ticks its start leaves (the body read, then the handler), not in the start itself. A timer set in that
 * turn and set again each time it fires stands for what the loop does between turns (reading the
 * probes). Returns the most requests that ran between two firings of it (or before the first), and the
 * order they ran in.
 */
async function burst(urgentEvery = 0): Promise<{ mostBetweenTimers: number; order: number[] }> {
  const turnStartedAt = performance.now();
  const pacer = new TurnPacer(SLICE_MS, () => performance.now() - turnStartedAt);
  const order: number[] = [];
  const start = (i: number) => () =>
    process.nextTick(() => {
      order.push(i);
      spin(COST_MS);
    });
  for (let i = 0; i < REQUESTS; i++) {
    const urgent = urgentEvery > 0 && i % urgentEvery === 0;
    if (pacer.startsNow()) {
      start(i)();
      // As in a socket's callback: its ticks run before the next socket is read.
      await Promise.resolve();
      await new Promise<void>((resolve) => process.nextTick(resolve));
    } else pacer.hold(start(i), urgent);
  }
  let mostBetweenTimers = 0;
  let ranAtLastTimer = 0;
  await new Promise<void>((resolve) => {
    const timer = (): void => {
      mostBetweenTimers = Math.max(mostBetweenTimers, order.length - ranAtLastTimer);
      ranAtLastTimer = order.length;
      if (order.length === REQUESTS) resolve();
      else setTimeout(timer, 0);
    };
    setTimeout(timer, 0);
  });
  return { mostBetweenTimers, order };
}

describe('TurnPacer', () => {
  it('starts a held burst over several turns: the loop comes round after a slice or two of it, never after all', async () => {
    const { mostBetweenTimers, order } = await burst();
    process.stdout.write(`[pacer] at most ${mostBetweenTimers} of ${REQUESTS} ran between two turns\n`);
    // About 4 per slice (the first turn's, then batches sized to the slice); a quarter leaves room for
    // a starved machine. Unpaced, all 100 run in the first turn.
    expect(mostBetweenTimers).toBeLessThanOrEqual(REQUESTS / 4);
    // Held ones start in the order they came.
    expect(order).toEqual([...order].sort((a, b) => a - b));
  });

  it('starts held renewals and releases (urgent) before the other held requests', async () => {
    const { order } = await burst(10);
    // The ones started in the first turn, in order; then the held ones.
    let startedAtOnce = 0;
    while (order[startedAtOnce] === startedAtOnce) startedAtOnce++;
    const held = order.slice(startedAtOnce);
    const urgent = held.filter((i) => i % 10 === 0);
    expect(urgent.length).toBeGreaterThan(0);
    expect(held.slice(0, urgent.length)).toEqual(urgent);
  });
});
