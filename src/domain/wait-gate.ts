import { ShuttingDownError, TooManyWaitersError } from './errors.js';
import type { LockLimits } from './limits.js';

/**
 * The callers of this instance waiting in any queue (locks, semaphores, read/write locks), counted in
 * one place so the per-instance and per-namespace caps bound them all together, and ended together at
 * shutdown.
 */
export class WaitGate {
  private readonly closing = new AbortController();
  private waiting = 0;
  /** Waiting callers by namespace; a namespace with none has no entry. */
  private readonly byNamespace = new Map<string, number>();

  constructor(private readonly limits: Pick<LockLimits, 'maxWaitersPerInstance' | 'maxWaitersPerNamespace'>) {}

  /** Callers of this instance waiting right now. */
  get count(): number {
    return this.waiting;
  }

  /** Aborted at shutdown: every wait ends at once instead of holding up the exit. */
  get signal(): AbortSignal {
    return this.closing.signal;
  }

  shutdown(): void {
    this.closing.abort(new ShuttingDownError());
  }

  /**
   * Admits one more waiting caller of `namespace`, or throws (shutting down, or a cap reached; the
   * namespace's own cap first, so a team at its cap is told so even when the instance has room).
   * Returns the function that lets it out again (call it exactly once).
   */
  enter(namespace: string): () => void {
    if (this.closing.signal.aborted) throw new ShuttingDownError();
    const here = this.byNamespace.get(namespace) ?? 0;
    if (here >= (this.limits.maxWaitersPerNamespace ?? Infinity)) throw new TooManyWaitersError('namespace');
    if (this.waiting >= this.limits.maxWaitersPerInstance) throw new TooManyWaitersError('instance');
    this.waiting++;
    this.byNamespace.set(namespace, here + 1);
    return () => {
      this.waiting--;
      const left = (this.byNamespace.get(namespace) ?? 1) - 1;
      if (left > 0) this.byNamespace.set(namespace, left);
      else this.byNamespace.delete(namespace);
    };
  }

  /** The signal a wait listens to: the caller's (if any) and shutdown. */
  waitSignal(callerSignal: AbortSignal | undefined): AbortSignal {
    return callerSignal ? AbortSignal.any([callerSignal, this.closing.signal]) : this.closing.signal;
  }
}
