import { performance } from 'node:perf_hooks';

interface TrackedLease {
  readonly grantedAtMs: number;
  /** performance.now() when the lease runs out unless renewed. */
  endsAtMs: number;
}

export interface LeaseTrackerEvents {
  /** A lease this instance granted ran out without being released (through this instance). */
  expired(heldSeconds: number): void;
}

/**
 * 1 s: how often leases that ran out are looked for. One timer for all leases instead of one per
 * lease (a timer per grant was a measurable share of the request path); an unreleased lease leaves
 * the count at most this much after its end.
 */
const SWEEP_INTERVAL_MS = 1000;

/**
 * The leases this instance granted, keyed by owner token (unique per grant), so metrics can report
 * how many it has out, how long each was held, and which ran out unreleased. It sees only the calls
 * that reach this instance: a lease renewed or released through another instance looks expired here.
 * Entries leave at release or (within SWEEP_INTERVAL_MS) after the end of their lease, so the map
 * never outgrows the live leases by more than one sweep's worth.
 */
export class LeaseTracker {
  private readonly leases = new Map<string, TrackedLease>();
  private sweeper: NodeJS.Timeout | undefined;

  constructor(private readonly events: LeaseTrackerEvents) {}

  /** Leases granted here and neither released nor run out. */
  get size(): number {
    return this.leases.size;
  }

  granted(ownerToken: string, ttlMs: number): void {
    const now = performance.now();
    // Local time from the reply is a little later than the store's own expiry: the count errs on
    // "still held" by a round trip, never on "gone" while the store still holds the lease.
    this.leases.set(ownerToken, { grantedAtMs: now, endsAtMs: now + ttlMs });
    if (this.sweeper === undefined) {
      this.sweeper = setInterval(() => this.sweep(), SWEEP_INTERVAL_MS);
      // Bookkeeping must never keep a process alive that is otherwise done.
      this.sweeper.unref();
    }
  }

  renewed(ownerToken: string, ttlMs: number): void {
    const lease = this.leases.get(ownerToken);
    if (lease !== undefined) lease.endsAtMs = performance.now() + ttlMs;
  }

  /** Stops tracking a released lease; returns how long it was held, or undefined if it was not granted here. */
  released(ownerToken: string): number | undefined {
    const lease = this.leases.get(ownerToken);
    if (lease === undefined) return undefined;
    this.leases.delete(ownerToken);
    return (performance.now() - lease.grantedAtMs) / 1000;
  }

  clear(): void {
    this.leases.clear();
    this.stopSweeping();
  }

  private sweep(): void {
    const now = performance.now();
    for (const [ownerToken, lease] of this.leases) {
      if (lease.endsAtMs > now) continue;
      this.leases.delete(ownerToken);
      this.events.expired((now - lease.grantedAtMs) / 1000);
    }
    if (this.leases.size === 0) this.stopSweeping();
  }

  private stopSweeping(): void {
    clearInterval(this.sweeper);
    this.sweeper = undefined;
  }
}
