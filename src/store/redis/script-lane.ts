import { OverloadedError } from '../../domain/errors.js';

/**
 * At most `limit` calls of one kind (the acquire and cancel scripts) in Redis at once from this
 * instance; the others wait here, in arrival order, before anything is sent.
 *
 * Why: a burst of callers (a cron fleet waking at the minute) sends one acquire script each, all in
 * the same few milliseconds, from every instance. Redis runs them one after another, so the last of a
 * thousand waits behind all the others and its reply comes after the command timeout: a healthy
 * Redis would read as a failed one, and every caller of the burst would get `store_unavailable`. Held
 * here instead, a call's deadline starts only when it is sent, Redis's queue stays short (limit per
 * instance), and a command timeout again means Redis itself was slow.
 *
 * A refusable call (a new acquire) that cannot be sent within `maxQueueMs` is refused with 503
 * `overloaded` before any store work: the caller is told the truth (this instance is over its budget),
 * and may retry elsewhere. Other calls (cancels, which take a caller out of a queue in Redis) always
 * wait their turn: dropping one would leave a waiter in Redis that nobody answers.
 */
/** A call waiting for its place: started (resolve) or refused (reject) once, whichever comes first. */
interface Queued {
  readonly resolve: () => void;
  readonly reject: (err: Error) => void;
  /** When it is refused if still queued (performance.now() ms); Infinity for a call that is never refused. */
  readonly refuseAt: number;
  done: boolean;
}

export class ScriptLane {
  private running = 0;
  /** The queued calls in arrival order; a started one is cleared, a refused one stays marked done. */
  private readonly queue: Array<Queued | undefined> = [];
  private head = 0;
  /**
   * One timer for the whole queue, not one per queued call: it fires at the oldest refusable call's
   * bound, refuses what has waited too long and is set again for the next. Refusable calls share one
   * bound, so their deadlines are in queue order.
   */
  private refusalTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly limit: number,
    private readonly maxQueueMs: number,
  ) {}

  /** Calls of this lane waiting here right now (not yet sent). */
  get queued(): number {
    return this.queue.length - this.head;
  }

  /** Runs `work` once a place in the lane is free (at once if one is). */
  async run<T>(work: () => Promise<T>, refusable: boolean): Promise<T> {
    // A queued call is handed the place of the call that ended (next), already counted in `running`.
    if (this.running >= this.limit) await this.turn(refusable);
    else this.running++;
    try {
      return await work();
    } finally {
      this.running--;
      this.next();
    }
  }

  private turn(refusable: boolean): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ resolve, reject, refuseAt: refusable ? performance.now() + this.maxQueueMs : Infinity, done: false });
      if (refusable && this.refusalTimer === undefined) this.refusalTimer = setTimeout(this.refuseLate, this.maxQueueMs);
    });
  }

  /** Refuses the queued refusable calls past their bound, and sets the timer for the next one still queued. */
  private readonly refuseLate = (): void => {
    this.refusalTimer = undefined;
    const now = performance.now();
    for (let i = this.head; i < this.queue.length; i++) {
      const queued = this.queue[i];
      if (queued === undefined || queued.done || queued.refuseAt === Infinity) continue;
      if (queued.refuseAt > now) {
        // The first refusable call not yet late: the next bound (a timer may fire a little early).
        this.refusalTimer = setTimeout(this.refuseLate, Math.max(1, Math.ceil(queued.refuseAt - now)));
        return;
      }
      queued.done = true;
      queued.reject(
        new OverloadedError(
          'store_queue',
          1000,
          `this instance already has ${this.limit} acquires in the store and could not send this one within ${this.maxQueueMs} ms; refused before any store work, retry after Retry-After or on another instance`,
        ),
      );
    }
  };

  /** Hands the place just freed to the first queued call still waiting (refused ones are skipped). */
  private next(): void {
    while (this.head < this.queue.length) {
      const queued = this.queue[this.head];
      this.queue[this.head] = undefined;
      this.head++;
      // The started part of the array is cut off now and then, not on every call (shift is O(n)).
      if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue.splice(0, this.head);
        this.head = 0;
      }
      if (queued !== undefined && !queued.done) {
        queued.done = true;
        queued.resolve();
        this.running++;
        return;
      }
    }
  }
}
