import { performance } from 'node:perf_hooks';

interface TrackedLease {
  readonly grantedAtMs: number;
  /** performance.now() when the lease runs out unless renewed (a lease on one key). */
  endsAtMs: number;
  /**
   * A lock set's keys still held, each with its own end: one key can be renewed or released through the
   * lock routes with the set's owner token, apart from the others. Undefined for a lease on one key.
   */
  readonly keys: Map<string, number> | undefined;
}

export interface LeaseTrackerEvents {
  /** A lease this instance granted ran out without being released (through this instance). */
  expired(heldSeconds: number): void;
  /** A lease this instance granted was released through it, after `heldSeconds`. */
  released(heldSeconds: number): void;
}

/**
 * 1 s: how often leases that ran out are looked for. One timer for all leases instead of one per
 * lease (a timer per grant was a measurable share of the request path); an unreleased lease leaves
 * the count at most this much after its end.
 */
const SWEEP_INTERVAL_MS = 1000;

/**
 * The leases this instance granted, keyed by owner token (unique per grant), so metrics can report
 * how many it has out, how long each was held, and which ran out unreleased. Each key of a lock set is
 * a lease of its own (as the quota counts it): its owner token's entry tracks every key apart. It sees
 * only the calls that reach this instance: a lease renewed or released through another instance looks
 * expired here. Entries leave at release or (within SWEEP_INTERVAL_MS) after the end of their lease, so
 * the map never outgrows the live leases by more than one sweep's worth.
 */
export class LeaseTracker {
  private readonly leases = new Map<string, TrackedLease>();
  /** The leases tracked: one per entry, one per key of a lock set's entry. */
  private held = 0;
  private sweeper: NodeJS.Timeout | undefined;

  constructor(private readonly events: LeaseTrackerEvents) {}

  /** Leases granted here and neither released nor run out (a lock set counts one per key). */
  get size(): number {
    return this.held;
  }

  /** A lease on one key. */
  granted(ownerToken: string, ttlMs: number): void {
    const now = performance.now();
    const before = this.leases.size;
    // Local time from the reply is a little later than the store's own expiry: the count errs on
    // "still held" by a round trip, never on "gone" while the store still holds the lease.
    this.leases.set(ownerToken, { grantedAtMs: now, endsAtMs: now + ttlMs, keys: undefined });
    // (Owner tokens are unique per grant: an entry is replaced only if the same grant is reported twice.)
    if (this.leases.size > before) this.held++;
    this.sweepLater();
  }

  /** A lock set: one lease per key of `ids`, under one owner token. */
  grantedSet(ownerToken: string, ids: readonly string[], ttlMs: number): void {
    const now = performance.now();
    const endsAtMs = now + ttlMs;
    this.forget(ownerToken);
    const keys = new Map<string, number>();
    for (const id of ids) keys.set(id, endsAtMs);
    this.leases.set(ownerToken, { grantedAtMs: now, endsAtMs, keys });
    this.held += keys.size;
    this.sweepLater();
  }

  /** `ids`: the keys renewed (a lock set's keys not among them keep their own end). */
  renewed(ownerToken: string, ids: readonly string[], ttlMs: number): void {
    const lease = this.leases.get(ownerToken);
    if (lease === undefined) return;
    const endsAtMs = performance.now() + ttlMs;
    if (lease.keys === undefined) {
      lease.endsAtMs = endsAtMs;
      return;
    }
    for (const id of ids) if (lease.keys.has(id)) lease.keys.set(id, endsAtMs);
  }

  /**
   * Stops tracking the released leases of `ids` (a lock set's others stay tracked) and reports each
   * one's hold time; a lease not granted here is not reported.
   */
  released(ownerToken: string, ids: readonly string[]): void {
    const lease = this.leases.get(ownerToken);
    if (lease === undefined) return;
    const now = performance.now();
    const heldSeconds = (now - lease.grantedAtMs) / 1000;
    if (lease.keys === undefined) {
      this.leases.delete(ownerToken);
      this.held--;
      this.events.released(heldSeconds);
      return;
    }
    for (const id of ids) {
      const endsAtMs = lease.keys.get(id);
      if (endsAtMs === undefined) continue;
      this.dropKey(ownerToken, lease.keys, id);
      // A set's release answers "released" when the token held any of the keys it names: one whose
      // lease had already run out (not swept yet) was not released, it expired.
      if (endsAtMs > now) this.events.released(heldSeconds);
      else this.events.expired(heldSeconds);
    }
  }

  /** Stops tracking the lease on `id` of `ownerToken`, ended by someone else (a force release): no hold time. */
  evicted(ownerToken: string, id: string): void {
    const lease = this.leases.get(ownerToken);
    if (lease === undefined) return;
    if (lease.keys === undefined) {
      this.leases.delete(ownerToken);
      this.held--;
    } else if (lease.keys.has(id)) {
      this.dropKey(ownerToken, lease.keys, id);
    }
  }

  clear(): void {
    this.leases.clear();
    this.held = 0;
    this.stopSweeping();
  }

  private dropKey(ownerToken: string, keys: Map<string, number>, id: string): void {
    keys.delete(id);
    this.held--;
    if (keys.size === 0) this.leases.delete(ownerToken);
  }

  /** Drops an entry whatever it tracks (no event). */
  private forget(ownerToken: string): void {
    const lease = this.leases.get(ownerToken);
    if (lease === undefined) return;
    this.leases.delete(ownerToken);
    this.held -= lease.keys?.size ?? 1;
  }

  private sweepLater(): void {
    if (this.sweeper !== undefined) return;
    this.sweeper = setInterval(() => this.sweep(), SWEEP_INTERVAL_MS);
    // Bookkeeping must never keep a process alive that is otherwise done.
    this.sweeper.unref();
  }

  private sweep(): void {
    const now = performance.now();
    for (const [ownerToken, lease] of this.leases) {
      if (lease.keys === undefined) {
        if (lease.endsAtMs > now) continue;
        this.leases.delete(ownerToken);
        this.held--;
        this.events.expired((now - lease.grantedAtMs) / 1000);
        continue;
      }
      for (const [id, endsAtMs] of lease.keys) {
        if (endsAtMs > now) continue;
        this.dropKey(ownerToken, lease.keys, id);
        this.events.expired((now - lease.grantedAtMs) / 1000);
      }
    }
    if (this.leases.size === 0) this.stopSweeping();
  }

  private stopSweeping(): void {
    clearInterval(this.sweeper);
    this.sweeper = undefined;
  }
}
