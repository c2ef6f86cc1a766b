import { performance } from 'node:perf_hooks';

/** A request held back for a later turn: when it was held, and what starts it (or refuses it). */
interface Held {
  readonly heldAt: number;
  readonly start: (waitedMs: number) => void;
}

/** A first-in, first-out queue that does not move its items on every take (Array.shift does). */
class Queue<T> {
  private items: T[] = [];
  private head = 0;

  get size(): number {
    return this.items.length - this.head;
  }

  push(item: T): void {
    this.items.push(item);
  }

  take(): T | undefined {
    if (this.head === this.items.length) return undefined;
    const item = this.items[this.head];
    this.items[this.head++] = undefined as T;
    // Emptied: start over, so the array does not grow for as long as the queue is never empty.
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    }
    return item;
  }
}

/** Most held requests started in one turn, however quick the last ones were. */
const MAX_BATCH = 256;
/**
 * Fewest held requests started in one turn, however slow the last ones were: a batch's time is wall
 * time, and on a starved machine it counts the time the process waited for a CPU; below this, a held
 * burst would drain a request or two a turn and its callers wait seconds.
 */
const MIN_BATCH = 16;

/**
 * Bounds how much request work one turn of the event loop starts. A burst is read in one turn: every
 * socket that became readable is parsed and run through the hooks and the handler before the loop
 * comes round, and a probe read in the next turn waits for all of it (hundreds of ms on a cold or
 * starved instance). Past `sliceMs` of a turn, requests are held and started in later turns, about
 * `sliceMs` of them a turn, renewals and releases first; between two turns the loop comes round and
 * reads the probes, which are never held.
 *
 * Each held request is started in an immediate of its own: Node runs the ticks and promise jobs a
 * callback leaves (the body read, the handler's synchronous part) before the next immediate, so a batch's
 * time is the work it started, measured from its first immediate to the one after its last; the next
 * batch's size is scaled from it to fit `sliceMs`. Immediates made by an immediate run in the next turn.
 */
export class TurnPacer {
  private readonly urgent = new Queue<Held>();
  private readonly normal = new Queue<Held>();
  /** A batch (or the first one) is scheduled. */
  private scheduled = false;
  private batchSize = MIN_BATCH;
  private batchStartedAt: number | undefined;

  /**
   * @param sliceMs How long one turn may run request starts before the rest wait for the next.
   * @param turnAgeMs How long the turn being run has gone on (so far as the caller's clock knows).
   */
  constructor(
    private readonly sliceMs: number,
    private readonly turnAgeMs: () => number,
  ) {}

  /** Requests held for a later turn right now. */
  get held(): number {
    return this.urgent.size + this.normal.size;
  }

  /** Whether a request may start in this turn: nobody is held, and the turn has time left. */
  startsNow(): boolean {
    return this.held === 0 && this.turnAgeMs() < this.sliceMs;
  }

  /** Holds a request that may not start now (see startsNow); `start` is told how long it was held (ms). `urgent`: ahead of the others. */
  hold(start: (heldMs: number) => void, urgent: boolean): void {
    (urgent ? this.urgent : this.normal).push({ heldAt: performance.now(), start });
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.plan);
    }
  }

  /** Sizes the next batch from the last one's time, and schedules it for the next turn (or stops: nobody held). */
  private readonly plan = (): void => {
    if (this.batchStartedAt !== undefined) {
      const tookMs = Math.max(performance.now() - this.batchStartedAt, 0.01);
      this.batchSize = Math.min(MAX_BATCH, Math.max(MIN_BATCH, Math.floor((this.batchSize * this.sliceMs) / tookMs)));
      this.batchStartedAt = undefined;
    }
    const size = Math.min(this.batchSize, this.held);
    if (size === 0) {
      this.scheduled = false;
      return;
    }
    for (let i = 0; i < size; i++) setImmediate(this.startOne);
    setImmediate(this.plan);
  };

  private readonly startOne = (): void => {
    const now = performance.now();
    this.batchStartedAt ??= now;
    const next = this.urgent.take() ?? this.normal.take();
    next?.start(now - next.heldAt);
  };
}
