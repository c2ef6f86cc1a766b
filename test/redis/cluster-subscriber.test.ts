import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { RedisCluster } from '../helpers/redis-cluster.js';
import { openReplicatedStore } from '../helpers/redis-store.js';
import { withClient } from '../helpers/redis-admin.js';
import type { RedisStore } from '../../src/store/redis/redis-store.js';
import { withWords } from '../helpers/store-words.js';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import { ChangeWatch, lockWatchSource } from '../../src/domain/watch.js';
import { StoreUnavailableError } from '../../src/domain/errors.js';

/**
 * docs/watch-and-lock-sets.md: "If the instance's subscription to Redis drops, every watcher reads the
 * state again when it is back". test/redis/store-wiring.test.ts checks that on one Redis; on a Cluster
 * the subscriber is ioredis's ClusterSubscriber, which reconnects (to any node) without the Cluster
 * client ever emitting 'ready' again, so RedisStore's re-read hook never runs.
 */
let cluster: RedisCluster;
let store: RedisStore;
beforeAll(async () => {
  cluster = await RedisCluster.start();
  store = await openReplicatedStore(cluster.connection, { keyPrefix: 'cluster-subscriber:', fenceGraceMs: 60_000 });
}, 60_000);
afterAll(async () => {
  await store?.close();
  await cluster?.stop();
});

/** Kills every pub/sub connection on every node of the Cluster (the store's subscriber is one of them). */
async function killSubscribers(): Promise<number> {
  let killed = 0;
  for (const s of cluster.servers) killed += Number(await withClient(s.port, (c) => c.client('KILL', 'TYPE', 'pubsub')));
  return killed;
}

it('Cluster: when the subscriber connection comes back, every listener is told to read again', async () => {
  const changes = vi.fn();
  const stop = await store.leases.watchChanges('lock', 'ns/reconnect', changes);
  // (A read again when ioredis re-makes the connection at start, before any gap, is harmless: counted from here.)
  const before = changes.mock.calls.length;
  expect(await killSubscribers()).toBeGreaterThan(0);
  await vi.waitFor(() => expect(changes.mock.calls.length).toBeGreaterThan(before), { timeout: 3_000 });
  stop();
});

it('Cluster: a lock released while the subscriber reconnects wakes its blocking query (not a stale "held" answer after waitMs)', async () => {
  const words = withWords(store);
  const key = 'ns/gap';
  const owner = newOwnerToken();
  // The store confirms grants on a replica (WAIT): on a loaded machine one may not be confirmed in time
  // (503, given back), so the grant is asked for until one is.
  let got: Awaited<ReturnType<typeof words.acquire>> | undefined;
  for (const started = performance.now(); got === undefined && performance.now() - started < 15_000;) {
    got = await words.acquire({ id: key, ownerToken: owner, ttlMs: 60_000, holder: null }).catch((err: unknown) => {
      if (!(err instanceof StoreUnavailableError)) throw err;
      return undefined;
    });
  }
  expect(got?.acquired).toBe(true);
  // What LeaseService.watch runs for locks (lease-service.ts newWatch).
  const watch = new ChangeWatch(lockWatchSource(words));
  const before = (await watch.wait(key, -1, 0)).index;
  const started = performance.now();
  const answer = watch.wait(key, before, 8_000);
  await new Promise((r) => setTimeout(r, 200)); // the watcher is subscribed and waiting
  // The node holding the store's subscriber connection; its kill and the release are sent together, so
  // the release's PUBLISH runs before the subscriber (which ioredis re-makes at once) is back.
  const admins = cluster.servers.map((s) => new Redis(s.port, '127.0.0.1'));
  try {
    const lists = await Promise.all(admins.map((a) => a.call('CLIENT', 'LIST', 'TYPE', 'pubsub') as Promise<string>));
    const admin = admins[lists.findIndex((l) => l.trim() !== '')] as Redis;
    const [killed, released] = await Promise.all([admin.client('KILL', 'TYPE', 'pubsub'), words.release(key, owner)]);
    expect(killed).toBe(1);
    expect(released).toBe(true);
  } finally {
    for (const a of admins) a.disconnect();
  }
  const view = await answer;
  const now = await words.inspectIndexed(key);
  expect(now.state).toBeNull();
  expect(view.index).not.toBe(before); // fails: the old index, from the last read before the release
  expect(view.state).toBeNull(); // fails: still shows the released lease as held
  expect(performance.now() - started).toBeLessThan(3_000); // fails: answered only after waitMs (8 s)
}, 20_000);
