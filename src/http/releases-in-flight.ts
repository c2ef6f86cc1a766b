/**
 * The lock releases this instance has in the store right now, per namespace and key: a waiting acquire
 * (waitMs > 0) of a key being released here is held back until that release has settled (its store
 * reply handled, the next holder answered), and only then parsed further and sent.
 *
 * Why: on a hot key the new holder's release and the previous holder's next acquire arrive together.
 * The release's script leaves at once (scripts.ts), but the acquire's request path (validation, the
 * lock service, its script) ran while Redis answered the release, and delayed reading that reply, on
 * which the next hand-off waits. Held here, the acquire runs after the hand-off instead. It still goes
 * through the same atomic script and queues in Redis's FIFO as before; only the moment it is sent moves,
 * by at most the release's own round trip. Other keys, and acquires that do not wait, are not held.
 *
 * Bounded: an entry lives while its release is in the store, and is removed when it settles, failed or not.
 */
export class ReleasesInFlight {
  private readonly inFlight = new Map<string, Promise<void>>();

  /** Entries right now (releases in the store). */
  get size(): number {
    return this.inFlight.size;
  }

  /** Runs `release` for `key` of `namespace`, marked in flight until it settles. */
  track<T>(namespace: string, key: string, release: () => Promise<T>): Promise<T> {
    const id = `${namespace}\0${key}`;
    const running = release();
    const settled: Promise<void> = running.then(
      () => this.settle(id, settled),
      () => this.settle(id, settled),
    );
    this.inFlight.set(id, settled);
    return running;
  }

  /** A promise settled when the release of `key` now in flight has settled; undefined when there is none. */
  settledOf(namespace: string, key: string): Promise<void> | undefined {
    return this.inFlight.size === 0 ? undefined : this.inFlight.get(`${namespace}\0${key}`);
  }

  private settle(id: string, settled: Promise<void>): void {
    // A later release of the same key may have replaced this entry: that one removes its own.
    if (this.inFlight.get(id) === settled) this.inFlight.delete(id);
  }
}
