import { describe, expect, it } from 'vitest';
import { ShuttingDownError, TooManyWaitersError } from '../../src/domain/errors.js';
import { WaitGate } from '../../src/domain/wait-gate.js';

/**
 * The caps on waiting callers (src/domain/wait-gate.ts), shared by every kind of wait: per key, per
 * namespace, per instance, and the end of every wait at shutdown. Which cap refused is part of the
 * answer (429 too_many_waiters names it).
 */
const LIMITS = { maxWaitersPerKey: 2, maxWaitersPerNamespace: 3, maxWaitersPerInstance: 4 };

/** Which cap refused `enter`, or 'admitted' (the caller is then let out again at once). */
function tryEnter(gate: WaitGate, namespace: string, id?: string): string {
  try {
    gate.enter(namespace, id)();
    return 'admitted';
  } catch (error) {
    if (error instanceof TooManyWaitersError) return error.scope;
    if (error instanceof ShuttingDownError) return 'shutting down';
    throw error;
  }
}

describe('WaitGate', () => {
  it('admits a key up to its cap, and the key alone is refused at the cap', () => {
    const gate = new WaitGate(LIMITS);
    gate.enter('a', 'a/k');
    expect(tryEnter(gate, 'a', 'a/k')).toBe('admitted');
    gate.enter('a', 'a/k');
    expect(gate.count).toBe(2);
    expect(tryEnter(gate, 'a', 'a/k')).toBe('key');
    expect(tryEnter(gate, 'a', 'a/other')).toBe('admitted');
    expect(tryEnter(gate, 'a')).toBe('admitted');
  });

  it('a caller let out frees its place on the key, in its namespace and on the instance', () => {
    const gate = new WaitGate(LIMITS);
    const first = gate.enter('a', 'a/k');
    gate.enter('a', 'a/k');
    gate.enter('a');
    expect(tryEnter(gate, 'a', 'a/k')).toBe('key');
    first();
    expect(gate.count).toBe(2);
    expect(tryEnter(gate, 'a', 'a/k')).toBe('admitted');
    gate.enter('a', 'a/k');
    expect(tryEnter(gate, 'a', 'a/k')).toBe('key');
    expect(tryEnter(gate, 'a')).toBe('namespace');
  });

  it('waits without a key count in their namespace and on the instance only', () => {
    const gate = new WaitGate(LIMITS);
    gate.enter('a');
    gate.enter('a');
    expect(tryEnter(gate, 'a', 'a/k')).toBe('admitted');
    gate.enter('a');
    expect(tryEnter(gate, 'a')).toBe('namespace');
    gate.enter('b');
    expect(gate.count).toBe(4);
    expect(tryEnter(gate, 'c')).toBe('instance');
  });

  it('the narrowest cap is named first', () => {
    const gate = new WaitGate({ maxWaitersPerKey: 1, maxWaitersPerNamespace: 1, maxWaitersPerInstance: 1 });
    gate.enter('a', 'a/k');
    expect(tryEnter(gate, 'a', 'a/k')).toBe('key');
    expect(tryEnter(gate, 'a', 'a/j')).toBe('namespace');
    expect(tryEnter(gate, 'b', 'b/k')).toBe('instance');
  });

  it('letting a caller out twice frees one place only', () => {
    const gate = new WaitGate(LIMITS);
    const leave = gate.enter('a', 'a/k');
    gate.enter('a', 'a/k');
    leave();
    leave();
    expect(gate.count).toBe(1);
    gate.enter('a', 'a/k');
    expect(tryEnter(gate, 'a', 'a/k')).toBe('key');
    gate.enter('a');
    expect(tryEnter(gate, 'a')).toBe('namespace');
  });

  it('enterKey counts an admitted caller against the key it now waits on, up to that key’s cap', () => {
    const gate = new WaitGate(LIMITS);
    gate.enter('a');
    const onKey = gate.enterKey('a/k');
    gate.enterKey('a/k');
    expect(() => gate.enterKey('a/k')).toThrow(TooManyWaitersError);
    expect(tryEnter(gate, 'a', 'a/k')).toBe('key');
    onKey();
    onKey();
    expect(tryEnter(gate, 'a', 'a/k')).toBe('admitted');
    gate.enterKey('a/k');
    expect(tryEnter(gate, 'a', 'a/k')).toBe('key');
    // Only the key: the caller's namespace and instance places were taken by enter.
    expect(gate.count).toBe(1);
  });

  it('after shutdown no wait is admitted, and the wait signal is aborted', () => {
    const gate = new WaitGate(LIMITS);
    const caller = new AbortController();
    const { signal } = gate.waitSignal(caller.signal);
    const ended = gate.waitSignal(caller.signal);
    ended.done();
    expect(signal.aborted).toBe(false);
    gate.shutdown();
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBeInstanceOf(ShuttingDownError);
    // A wait that is over is not aborted any more: it let go of its signal.
    expect(ended.signal.aborted).toBe(false);
    expect(gate.waitSignal(undefined).signal.aborted).toBe(true);
    expect(gate.waitSignal(caller.signal).signal.aborted).toBe(true);
    expect(tryEnter(gate, 'a', 'a/k')).toBe('shutting down');
    expect(tryEnter(gate, 'a')).toBe('shutting down');
    expect(() => gate.enterKey('a/k')).toThrow(ShuttingDownError);
    expect(gate.count).toBe(0);
  });

  it('the wait signal follows the caller’s own signal too', () => {
    const gate = new WaitGate(LIMITS);
    const caller = new AbortController();
    const { signal } = gate.waitSignal(caller.signal);
    const other = new AbortController();
    const ended = gate.waitSignal(other.signal);
    ended.done();
    const reason = new Error('left');
    caller.abort(reason);
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBe(reason);
    expect(gate.signal.aborted).toBe(false);
    // After done, the caller's signal no longer reaches the wait's.
    other.abort(new Error('left later'));
    expect(ended.signal.aborted).toBe(false);
    // A caller gone already: its own signal, aborted.
    expect(gate.waitSignal(caller.signal).signal.reason).toBe(reason);
  });
});
