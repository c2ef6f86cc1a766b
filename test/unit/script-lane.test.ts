import { afterEach, describe, expect, it, vi } from 'vitest';
import { OverloadedError } from '../../src/domain/errors.js';
import { ScriptLane } from '../../src/store/redis/script-lane.js';

/**
 * The acquire lane: at most `limit` calls in the store at once, the rest started in arrival order as
 * places free up; a refusable call that waited past its bound is refused (503 overloaded) without
 * having been sent, and the others wait however long it takes.
 */

/** A call whose end the test decides; `started` says whether the lane let it begin. */
function gatedCall() {
  let finish!: () => void;
  const gate = new Promise<void>((resolve) => (finish = resolve));
  const call = {
    started: false,
    finish,
    work: async () => {
      call.started = true;
      await gate;
      return 'done';
    },
  };
  return call;
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('ScriptLane', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('runs at most `limit` calls at once and starts the queued ones in arrival order', async () => {
    const lane = new ScriptLane(2, 60_000);
    const calls = Array.from({ length: 5 }, () => gatedCall());
    const results = calls.map((c) => lane.run(c.work, true));
    await tick();
    expect(calls.map((c) => c.started)).toEqual([true, true, false, false, false]);
    expect(lane.queued).toBe(3);
    calls[1]?.finish();
    await tick();
    expect(calls.map((c) => c.started)).toEqual([true, true, true, false, false]);
    // The freed place went to the queue's first call: a newcomer does not get in beside it.
    const late = gatedCall();
    const lateResult = lane.run(late.work, true);
    await tick();
    expect(late.started).toBe(false);
    calls.push(late);
    results.push(lateResult);
    calls[0]?.finish();
    calls[2]?.finish();
    await tick();
    expect(calls.map((c) => c.started)).toEqual([true, true, true, true, true, false]);
    for (const c of calls) c.finish();
    expect(await Promise.all(results)).toEqual(['done', 'done', 'done', 'done', 'done', 'done']);
    expect(lane.queued).toBe(0);
  });

  it('refuses a refusable call not sent within its bound, before it runs; a cancel-like call waits on', async () => {
    const lane = new ScriptLane(1, 30);
    const first = gatedCall();
    const running = lane.run(first.work, true);
    const refused = gatedCall();
    const patient = gatedCall();
    const refusedResult = lane.run(refused.work, true);
    const patientResult = lane.run(patient.work, false);
    await expect(refusedResult).rejects.toBeInstanceOf(OverloadedError);
    await expect(refusedResult).rejects.toMatchObject({ budget: 'store_queue' });
    expect(refused.started).toBe(false);
    // The refused call's place in the queue is skipped: the next one gets the freed place.
    first.finish();
    await running;
    await tick();
    expect(patient.started).toBe(true);
    patient.finish();
    expect(await patientResult).toBe('done');
  });

  it('keeps one timer for the whole queue and refuses each call at its own bound', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const lane = new ScriptLane(1, 30);
    const first = gatedCall();
    const running = lane.run(first.work, true);
    await vi.advanceTimersByTimeAsync(0);
    const early = Array.from({ length: 50 }, () => gatedCall());
    const earlyResults = early.map((c) => lane.run(c.work, true).catch((err: unknown) => err));
    await vi.advanceTimersByTimeAsync(0);
    // Fifty calls queued: one timer, not one each.
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(20);
    const late = gatedCall();
    const lateResult = lane.run(late.work, true).catch((err: unknown) => err);
    await vi.advanceTimersByTimeAsync(10);
    // The first fifty waited 30 ms: refused. The late one has waited 10 ms and is still queued.
    for (const result of await Promise.all(earlyResults)) expect(result).toBeInstanceOf(OverloadedError);
    expect(vi.getTimerCount()).toBe(1);
    let lateSettled = false;
    void lateResult.then(() => (lateSettled = true));
    await vi.advanceTimersByTimeAsync(19);
    expect(lateSettled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await lateResult).toBeInstanceOf(OverloadedError);
    expect(early.some((c) => c.started) || late.started).toBe(false);
    expect(vi.getTimerCount()).toBe(0);
    first.finish();
    expect(await running).toBe('done');
  });

  it('refuses a refusable call at its bound even when it is queued behind one that is never refused', async () => {
    const lane = new ScriptLane(1, 30);
    const first = gatedCall();
    const running = lane.run(first.work, true);
    const patient = gatedCall();
    const patientResult = lane.run(patient.work, false);
    const refused = gatedCall();
    let outcome: unknown;
    void lane.run(refused.work, true).then(
      (value) => (outcome = value),
      (err: unknown) => (outcome = err),
    );
    // Its bound is 30 ms: a few seconds is any machine's timer lateness, not a wait on the call ahead.
    await vi.waitFor(() => expect(outcome).toBeInstanceOf(OverloadedError), { timeout: 5_000, interval: 10 });
    expect(refused.started).toBe(false);
    first.finish();
    await running;
    await tick();
    expect(patient.started).toBe(true);
    patient.finish();
    expect(await patientResult).toBe('done');
  });

  it('gives the place back when a call fails', async () => {
    const lane = new ScriptLane(1, 60_000);
    await expect(lane.run(() => Promise.reject(new Error('boom')), true)).rejects.toThrow('boom');
    expect(await lane.run(() => Promise.resolve('next'), true)).toBe('next');
  });
});
