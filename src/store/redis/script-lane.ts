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
export class ScriptLane {
  private running = 0;
  /** Each queued call's start: false if it was refused meanwhile (then it is skipped). */
  private readonly queue: Array<(() => boolean) | undefined> = [];
  private head = 0;

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
      let done = false;
      const refuse = () => {
        if (done) return;
        done = true;
        reject(
          new OverloadedError(
            'store_queue',
            1000,
            `this instance already has ${this.limit} acquires in the store and could not send this one within ${this.maxQueueMs} ms; refused before any store work, retry after Retry-After or on another instance`,
          ),
        );
      };
      const timer = refusable ? setTimeout(refuse, this.maxQueueMs) : undefined;
      this.queue.push(() => {
        if (done) return false;
        done = true;
        clearTimeout(timer);
        resolve();
        return true;
      });
    });
  }

  /** Hands the place just freed to the first queued call still waiting (refused ones are skipped). */
  private next(): void {
    while (this.head < this.queue.length) {
      const start = this.queue[this.head];
      this.queue[this.head] = undefined;
      this.head++;
      // The started part of the array is cut off now and then, not on every call (shift is O(n)).
      if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue.splice(0, this.head);
        this.head = 0;
      }
      if (start?.()) {
        this.running++;
        return;
      }
    }
  }
}
