import { Cluster } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { defineScripts } from '../../src/store/redis/scripts.js';

/**
 * On a Cluster client, ioredis groups auto-pipelined calls by the slot of their first argument, which
 * for a lock set's scripts is their key count: such a call shared a pipeline with calls for other
 * masters and ioredis refused the whole pipeline. Those scripts are therefore kept out of
 * auto-pipelining (sent on their own, routed by their keys), and only those. The client is never
 * connected here: what is checked is the client's options as defineScripts leaves them.
 */
const LOCK_SET_COMMANDS = ['khLockSetAcquire', 'khLockSetRelease', 'khLockSetRenew'];
const clients: Cluster[] = [];

function lazyCluster(options: { autoPipeliningIgnoredCommands?: string[] } = {}): Cluster {
  const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true, enableAutoPipelining: true, ...options });
  clients.push(cluster);
  return cluster;
}

afterEach(() => {
  for (const cluster of clients.splice(0)) cluster.disconnect();
});

describe('the script table on a Cluster client', () => {
  it("keeps the lock sets' commands, and only those, out of auto-pipelining, beside the client's own list", () => {
    const cluster = lazyCluster({ autoPipeliningIgnoredCommands: ['ping'] });
    defineScripts(cluster);
    // The client's own entry kept; every other script (a fixed key count) stays auto-pipelined.
    const ignored = cluster.options.autoPipeliningIgnoredCommands ?? [];
    expect([...ignored].sort()).toEqual(['ping', ...LOCK_SET_COMMANDS].sort());
    // Defined again on the same client: no command listed twice.
    defineScripts(cluster);
    expect([...(cluster.options.autoPipeliningIgnoredCommands ?? [])].sort()).toEqual(['ping', ...LOCK_SET_COMMANDS].sort());
  });

  it("leaves ioredis's default list, which every Cluster client shares, as it was", () => {
    const first = lazyCluster();
    const shared = first.options.autoPipeliningIgnoredCommands;
    defineScripts(first);
    expect([...(first.options.autoPipeliningIgnoredCommands ?? [])].sort()).toEqual([...LOCK_SET_COMMANDS].sort());
    expect(shared).toEqual([]);
    expect(lazyCluster().options.autoPipeliningIgnoredCommands).toEqual([]);
  });
});
