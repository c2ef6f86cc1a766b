import { describe, expect, it } from 'vitest';
import type { HistoryKey, HistoryRecord } from '../../src/domain/history.js';
import { MemoryHistory } from '../../src/store/memory/memory-history.js';

/**
 * The embedded store keeps eventsPerKey lines per key, oldest first out: a line trimmed is gone, and a
 * read answers only from the lines kept. Events are dated on two clocks (the store's for grants and
 * renewals, the instance's for releases), so a later line can be dated before an earlier one.
 */
describe('embedded store history: lines past eventsPerKey are gone', () => {
  const key: HistoryKey = { namespace: 'ns', primitive: 'lock', key: 'k' };
  const RETENTION = 1_000;

  it('a line trimmed out is never read back, even when the line kept after it is past the retention', async () => {
    let now = 5_000;
    const history = new MemoryHistory({ eventsPerKey: 1, keysPerNamespace: 10, retentionMs: RETENTION }, () => now);
    const renewal: HistoryRecord = { kind: 'renewed', at: 5_000, lease: 'L1', fencingToken: 1, expiresAt: 6_000 };
    // Its release, dated by the instance's clock 10 ms behind the store's.
    const release: HistoryRecord = { kind: 'released', at: 4_990, lease: 'L1' };
    await history.append([{ ...key, record: renewal }]);
    await history.append([{ ...key, record: release }]);
    expect(await history.read(key)).toStrictEqual([release]);
    // The release past the retention, the renewal not: the key's one line kept is the release's.
    now = 4_995 + RETENTION;
    expect(await history.read(key)).toStrictEqual([]);
  });
});
