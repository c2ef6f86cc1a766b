import { describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { LockService, newOwnerToken } from '../../src/domain/lock-service.js';
import { LockSetService } from '../../src/domain/lock-sets.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';

describe('a waiting lock set whose caller left', () => {
  it('takes nothing once the caller is gone (as a queued lock acquire does)', async () => {
    const store = new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 });
    const locks = new LockService(store, DEFAULT_LIMITS);
    const sets = new LockSetService(store, DEFAULT_LIMITS, locks);
    const held = await locks.acquire('default', 'b', 10_000);
    const gone = new AbortController();
    // The caller disconnects while the set looks at the busy key again (one store read), just as the key frees.
    const leases = store.leases as unknown as { inspectIndexed: (...args: unknown[]) => Promise<unknown> };
    const inspect = leases.inspectIndexed.bind(leases);
    let reads = 0;
    leases.inspectIndexed = async (...args: unknown[]) => {
      if (++reads === 1) {
        await locks.lease.release('lock', 'default', 'b', held.ownerToken);
        gone.abort(new Error('caller gone'));
      }
      return inspect(...args);
    };
    const outcome = await sets.acquire('default', ['a', 'b'], 10_000, { waitMs: 5_000, signal: gone.signal }).then(
      () => 'granted',
      () => 'refused',
    );
    expect(outcome).toBe('refused');
    // Nothing is left held for a caller nobody will answer.
    expect(await locks.lease.inspect('lock', 'default', 'a')).toBeNull();
    expect(await locks.lease.inspect('lock', 'default', 'b')).toBeNull();
    void newOwnerToken;
    await store.close();
  });
});
