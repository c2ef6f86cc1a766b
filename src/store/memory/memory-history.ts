import { carryLeaseFactsInLines, encodeRecord, readRecords, historyName } from '../../domain/history.js';
import type { HistoryAppend, HistoryKey, HistoryLimits, HistoryRecord, HistoryStore } from '../../domain/history.js';

/**
 * The embedded store's history: per namespace, a Map of key -> ring of encoded events, in order of the
 * last write (a write moves its key to the end), so the least recently written key is the first one.
 * Kept encoded, as the other stores keep them: a string per event costs what it costs there, and the
 * bench's bytes per event hold for every store.
 */
export class MemoryHistory implements HistoryStore {
  private readonly namespaces = new Map<string, Map<string, { events: string[]; last: number }>>();

  constructor(
    private readonly limits: HistoryLimits,
    private readonly now: () => number = Date.now,
  ) {}

  append(batch: readonly HistoryAppend[]): Promise<void> {
    const now = this.now();
    const written = new Set<Map<string, { events: string[]; last: number }>>();
    for (const entry of batch) {
      let keys = this.namespaces.get(entry.namespace);
      if (!keys) {
        keys = new Map();
        this.namespaces.set(entry.namespace, keys);
      }
      const name = historyName(entry);
      // Stryker disable next-line ArrayDeclaration: an unreadable first line is skipped by readRecords and is the first line trimmed
      const ring = keys.get(name) ?? { events: [], last: now };
      keys.delete(name);
      ring.events.push(encodeRecord(entry.record));
      if (ring.events.length > this.limits.eventsPerKey) {
        const cut = ring.events.length - this.limits.eventsPerKey;
        // A lease's lock-delay, holder and grant time outlive its grant's line (see carryLeaseFacts).
        carryLeaseFactsInLines(ring.events, cut);
        ring.events.splice(0, cut);
      }
      ring.last = now;
      keys.set(name, ring);
      written.add(keys);
    }
    // Once the batch is in, as the other stores do: a key the batch wrote is as recent as any other it
    // wrote (a grant early in a large batch is not evicted by the releases after it, then its release kept alone).
    for (const keys of written) this.trim(keys, now);
    return Promise.resolve();
  }

  /** Drops the keys idle past the retention, then the least recently written past the cap. */
  private trim(keys: Map<string, { last: number }>, now: number): void {
    for (const [name, ring] of keys) {
      if (keys.size <= this.limits.keysPerNamespace && ring.last > now - this.limits.retentionMs) break;
      keys.delete(name);
    }
  }

  read(key: HistoryKey): Promise<HistoryRecord[]> {
    const ring = this.namespaces.get(key.namespace)?.get(historyName(key));
    const oldest = this.now() - this.limits.retentionMs;
    // Stryker disable next-line ArrayDeclaration: readRecords skips an unreadable line: an unknown key reads as no events either way
    return Promise.resolve(readRecords(ring?.events ?? [], oldest, this.limits.eventsPerKey));
  }

  /** Whether anything is kept for the key, however old (for tests of the retention). */
  stored(key: HistoryKey): Promise<boolean> {
    return Promise.resolve(this.namespaces.get(key.namespace)?.has(historyName(key)) ?? false);
  }

  close(): Promise<void> {
    this.namespaces.clear();
    return Promise.resolve();
  }
}
