import { performance } from 'node:perf_hooks';

/**
 * 10 ms: how often this process checks how late its own event loop runs. A check costs a timer
 * callback; stalls shorter than this are not told apart from ordinary jitter, and do not need to be.
 */
const SAMPLE_MS = 10;
/**
 * 20 ms: lateness below this is timer jitter (a few ms a sample on a busy host, which would add up over
 * a long span), not a stall. Counting less than the whole lag only ever blames the store more.
 */
const JITTER_MS = 20;
/** 512 stalls remembered: at one per sample, five seconds of a constantly late loop. */
const RING = 512;

/**
 * How long this process's own event loop was held up (by its own work, or by a host that did not
 * give it the CPU) within a span of time. A reply that came back late is then told apart: late
 * because the store was slow, or because this process could not read and act on it sooner.
 *
 * A timer due every SAMPLE_MS records how late it ran, and when: a stall of S ms shows as one sample
 * S ms late, ending when the stall ended.
 */
class OwnLag {
  private readonly endedAt = new Float64Array(RING);
  private readonly lateMs = new Float64Array(RING);
  private next = 0;
  private timer: NodeJS.Timeout | undefined;
  /** When the sampling timer is due next: a loop held up right now has not run it yet. */
  private due = 0;

  private start(): void {
    this.due = performance.now() + SAMPLE_MS;
    this.timer = setInterval(() => {
      const now = performance.now();
      const late = now - this.due;
      this.due = now + SAMPLE_MS;
      if (late <= JITTER_MS) return;
      this.endedAt[this.next] = now;
      this.lateMs[this.next] = late;
      this.next = (this.next + 1) % RING;
    }, SAMPLE_MS);
    // Never what keeps a process alive.
    this.timer.unref();
  }

  /** Milliseconds this process's event loop was held up between `from` and `to` (performance.now() times). */
  heldUpBetween(from: number, to: number): number {
    if (this.timer === undefined) {
      this.start();
      return 0;
    }
    // A stall still going on (the code asking runs inside it): the sampling timer is overdue.
    let total = Math.max(0, to - Math.max(this.due, from));
    if (total <= JITTER_MS) total = 0;
    for (let i = 0; i < RING; i++) {
      const end = this.endedAt[i] as number;
      // The part of a stall that falls inside the span.
      if (end > from) total += Math.max(0, Math.min(end, to) - Math.max(end - (this.lateMs[i] as number), from));
    }
    return total;
  }

  /** Starts sampling now (it starts by itself on first use; a process that grants leases calls this early). */
  watch(): void {
    if (this.timer === undefined) this.start();
  }
}

export const ownLag = new OwnLag();
