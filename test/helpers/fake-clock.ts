import type { Clock } from '../../src/store/shared/clock.js';

/**
 * A store clock the test moves by hand: forwards, backwards (an NTP step the monotonic clock rules out
 * in production, but a backend's own clock may still take), or not at all (many grants inside one
 * microsecond). Only the store's notion of "now" is faked; timers stay real.
 */
export class FakeClock {
  /** Unix milliseconds, with a fractional part like the real clock. */
  nowMs: number;

  constructor(startMs = Date.UTC(2030, 0, 1)) {
    this.nowMs = startMs;
  }

  /** The function to hand to a store as its `clock`. */
  readonly now: Clock = () => this.nowMs;

  advance(ms: number): void {
    this.nowMs += ms;
  }

  /** Steps back (or forward) to an absolute time, as a clock correction does. */
  set(ms: number): void {
    this.nowMs = ms;
  }
}
