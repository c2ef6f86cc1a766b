import type { KeySpace } from '../../src/store/redis/keys.js';
import type { Scripts } from '../../src/store/redis/scripts.js';

/**
 * A plain lock's acquire and release through the scripts a connection defined (defineScripts): no wait,
 * no holder, no quota, no lock-delay. For tests about how a call reaches Redis (the command sent, the
 * library loaded), not about the lock rules.
 */
export function lockScriptCalls(space: KeySpace, graceMs: number) {
  const handOver = { graceMs, channelPrefix: space.grantChannelPrefix() };
  return {
    acquire: (scripts: Scripts, id: string, ownerToken: string): Promise<unknown> =>
      scripts.run('acquire', {
        ...handOver,
        lockName: id,
        keys: space.lockKeys(id),
        ownerToken,
        ttlMs: 10_000,
        holder: '',
        idempotencyKey: '',
        waitMs: 0,
        waiterId: '-',
        instanceId: 'inst-a',
        maxWaiters: 10,
        livenessMs: 3_000,
        maxQuotaSlots: 0,
      }),
    release: (scripts: Scripts, id: string, ownerToken: string, atOnce = false): Promise<unknown> =>
      scripts.run('release', { ...handOver, lockName: id, keys: space.lockKeys(id), ownerToken }, atOnce),
  };
}
