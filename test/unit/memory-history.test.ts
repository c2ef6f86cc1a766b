import { describe, expect, it } from 'vitest';
import type { HistoryKey, HistoryRecord } from '../../src/domain/history.js';
import { MemoryHistory } from '../../src/store/memory/memory-history.js';

/**
 * The embedded store's history at the edges of its limits, on a clock the test moves (the contract,
 * test/conformance/history.contract.ts, checks the same limits away from their edges).
 */
describe('embedded store history limits, at their edges', () => {
  const RETENTION = 1_000;
  const key = (k: string, namespace = 'ns'): HistoryKey => ({ namespace, primitive: 'lock', key: k });
  const event = (at: number): HistoryRecord => ({ kind: 'released', at });

  it('a namespace keeps exactly keysPerNamespace keys; one more drops the least recently written', async () => {
    let now = 0;
    const history = new MemoryHistory({ eventsPerKey: 10, keysPerNamespace: 2, retentionMs: RETENTION }, () => now);
    await history.append([{ ...key('a'), record: event(now) }]);
    now = 1;
    await history.append([{ ...key('b'), record: event(now) }]);
    expect([await history.stored(key('a')), await history.stored(key('b'))]).toStrictEqual([true, true]);
    now = 2;
    await history.append([{ ...key('c'), record: event(now) }]);
    expect([await history.stored(key('a')), await history.stored(key('b')), await history.stored(key('c'))]).toStrictEqual([
      false,
      true,
      true,
    ]);
  });

  it('a key last written exactly retentionMs ago is dropped at the next write; an event exactly that old is still read', async () => {
    let now = 0;
    const history = new MemoryHistory({ eventsPerKey: 10, keysPerNamespace: 10, retentionMs: RETENTION }, () => now);
    await history.append([{ ...key('old'), record: event(0) }]);
    now = RETENTION;
    expect(await history.read(key('old'))).toStrictEqual([event(0)]);
    now = RETENTION + 1;
    expect(await history.read(key('old'))).toStrictEqual([]);
    now = RETENTION - 1;
    await history.append([{ ...key('new'), record: event(now) }]);
    expect(await history.stored(key('old'))).toBe(true);
    now = RETENTION;
    await history.append([{ ...key('new'), record: event(now) }]);
    expect(await history.stored(key('old'))).toBe(false);
  });

  it('nothing is stored for a namespace never written; close forgets everything', async () => {
    const history = new MemoryHistory({ eventsPerKey: 10, keysPerNamespace: 10, retentionMs: RETENTION });
    expect(await history.stored(key('k', 'never'))).toBe(false);
    await history.append([{ ...key('k'), record: event(Date.now()) }]);
    expect(await history.read(key('k'))).toHaveLength(1);
    await history.close();
    expect(await history.stored(key('k'))).toBe(false);
    expect(await history.read(key('k'))).toStrictEqual([]);
  });
});
