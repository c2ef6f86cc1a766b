import { performance } from 'node:perf_hooks';

interface TrackedLease {
  readonly grantedAtMs: number;
  timer: NodeJS.Timeout;
}

export interface LeaseTrackerEvents {
  /** A lease this instance granted ran out without being released (through this instance). */
  expired(heldSeconds: number): void;
}

/**
 * The leases this instance granted, keyed by owner token (unique per grant), so metrics can report
 * how many it has out, how long each was held, and which ran out unreleased. It sees only the calls
 * that reach this instance: a lease renewed or released through another instance looks expired here.
 * Entries leave at release or at the end of their lease, so the map never outgrows the live leases.
 */
export class LeaseTracker {
  private readonly leases = new Map<string, TrackedLease>();

  constructor(private readonly events: LeaseTrackerEvents) {}

  /** Leases granted here and neither released nor run out. */
  get size(): number {
    return this.leases.size;
  }

  granted(ownerToken: string, ttlMs: number): void {
    this.forget(ownerToken);
    const lease: TrackedLease = { grantedAtMs: performance.now(), timer: this.expiryTimer(ownerToken, ttlMs) };
    this.leases.set(ownerToken, lease);
  }

  renewed(ownerToken: string, ttlMs: number): void {
    const lease = this.leases.get(ownerToken);
    if (lease === undefined) return;
    clearTimeout(lease.timer);
    lease.timer = this.expiryTimer(ownerToken, ttlMs);
  }

  /** Stops tracking a released lease; returns how long it was held, or undefined if it was not granted here. */
  released(ownerToken: string): number | undefined {
    const lease = this.leases.get(ownerToken);
    if (lease === undefined) return undefined;
    this.forget(ownerToken);
    return (performance.now() - lease.grantedAtMs) / 1000;
  }

  clear(): void {
    for (const lease of this.leases.values()) clearTimeout(lease.timer);
    this.leases.clear();
  }

  private forget(ownerToken: string): void {
    const lease = this.leases.get(ownerToken);
    if (lease === undefined) return;
    clearTimeout(lease.timer);
    this.leases.delete(ownerToken);
  }

  private expiryTimer(ownerToken: string, ttlMs: number): NodeJS.Timeout {
    // Local time from the reply is a little later than the store's own expiry: the count errs on
    // "still held" by a round trip, never on "gone" while the store still holds the lease.
    const timer = setTimeout(() => {
      const lease = this.leases.get(ownerToken);
      if (lease === undefined) return;
      this.leases.delete(ownerToken);
      this.events.expired((performance.now() - lease.grantedAtMs) / 1000);
    }, ttlMs);
    // Bookkeeping must never keep a process alive that is otherwise done.
    timer.unref();
    return timer;
  }
}
