import { ShuttingDownError, TooManyWaitersError } from './errors.js';
import type { LeaseLimits } from './limits.js';

/**
 * The callers of this instance with an open wait of any kind (a queued lock, semaphore or read/write
 * lock acquire, a lock set waiting for a busy key, a blocking query), counted in one place so the
 * per-key, per-namespace and per-instance caps bound them all together, and ended together at
 * shutdown. Each open wait holds a connection, a timer and a share of every change's fan-out: a kind
 * that is not counted here is a way around the caps.
 */
export class WaitGate {
  private readonly closing = new AbortController();
  private waiting = 0;
  /** Waiting callers by namespace; a namespace with none has no entry. */
  private readonly byNamespace = new Map<string, number>();
  /** Waiting callers by store id (this instance's share of a key's waiters); a key with none has no entry. */
  private readonly byKey = new Map<string, number>();
  /** The signals of the open waits that follow a caller's signal: aborted here at shutdown. */
  private readonly following = new Set<AbortController>();

  constructor(private readonly limits: Pick<LeaseLimits, 'maxWaitersPerKey' | 'maxWaitersPerInstance' | 'maxWaitersPerNamespace'>) {}

  /** Callers of this instance waiting right now. */
  get count(): number {
    return this.waiting;
  }

  /** Aborted at shutdown: every wait ends at once instead of holding up the exit. */
  get signal(): AbortSignal {
    return this.closing.signal;
  }

  shutdown(): void {
    const reason = new ShuttingDownError();
    this.closing.abort(reason);
    // A copy: each wait's abort listener may end its wait (and leave the set) while this runs.
    for (const controller of [...this.following]) controller.abort(reason);
    this.following.clear();
  }

  /**
   * Admits one more waiting caller of `namespace` (waiting on the key with store id `id`, when given),
   * or throws (shutting down, or a cap reached; the narrowest first, so a team at its cap is told so
   * even when the instance has room). Returns the function that lets it out again (call it exactly once).
   */
  enter(namespace: string, id?: string): () => void {
    if (this.closing.signal.aborted) throw new ShuttingDownError();
    if (id !== undefined) this.checkKey(id);
    const here = this.byNamespace.get(namespace) ?? 0;
    if (here >= (this.limits.maxWaitersPerNamespace ?? Infinity)) throw new TooManyWaitersError('namespace');
    if (this.waiting >= this.limits.maxWaitersPerInstance) throw new TooManyWaitersError('instance');
    this.waiting++;
    this.byNamespace.set(namespace, here + 1);
    const leaveKey = id === undefined ? undefined : this.countKey(id);
    return once(() => {
      leaveKey?.();
      this.waiting--;
      decrement(this.byNamespace, namespace);
    });
  }

  /**
   * Counts a caller already admitted by `enter` against the key it now waits on (a lock set waits on
   * whichever of its keys was busy), or throws when that key's cap is reached.
   */
  enterKey(id: string): () => void {
    if (this.closing.signal.aborted) throw new ShuttingDownError();
    this.checkKey(id);
    return once(this.countKey(id));
  }

  /**
   * The signal a wait listens to: aborted when the caller's (if any) is, or at shutdown, whichever comes
   * first. `done` ends it when the wait is over (call it exactly once).
   *
   * Not AbortSignal.any([caller, closing]): on Node 20 every such signal leaves an entry in the
   * long-lived closing signal's set of dependants that is never removed (nodejs/node#55351), one per
   * wait for the life of the process, and the call cost about twice a controller with one listener.
   */
  waitSignal(callerSignal: AbortSignal | undefined): WaitSignal {
    const closing = this.closing.signal;
    if (callerSignal === undefined || closing.aborted) return { signal: closing, done: nothing };
    if (callerSignal.aborted) return { signal: callerSignal, done: nothing };
    const controller = new AbortController();
    const follow = (): void => controller.abort(callerSignal.reason);
    callerSignal.addEventListener('abort', follow, { once: true });
    this.following.add(controller);
    return {
      signal: controller.signal,
      done: () => {
        callerSignal.removeEventListener('abort', follow);
        this.following.delete(controller);
      },
    };
  }

  /**
   * The per-key cap counts this instance's waiters of the key: the store's queue caps queued acquires
   * across instances, but blocking queries and lock-set waits live here only, and each one is a share
   * of the key's fan-out when it changes.
   */
  private checkKey(id: string): void {
    if ((this.byKey.get(id) ?? 0) >= this.limits.maxWaitersPerKey) throw new TooManyWaitersError('key');
  }

  private countKey(id: string): () => void {
    this.byKey.set(id, (this.byKey.get(id) ?? 0) + 1);
    return () => decrement(this.byKey, id);
  }
}

/** The signal of one wait (WaitGate.waitSignal). */
export interface WaitSignal {
  readonly signal: AbortSignal;
  /** The wait is over: stop following the caller's signal and shutdown. */
  done(): void;
}

const nothing = (): void => undefined;

function decrement(counts: Map<string, number>, name: string): void {
  const left = (counts.get(name) ?? 1) - 1;
  if (left > 0) counts.set(name, left);
  else counts.delete(name);
}

/** `fn`, run at most once however often it is called (a wait is let out exactly once). */
function once(fn: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    fn();
  };
}
