import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { StoreUnavailableError } from '../../src/domain/errors.js';
import { EtcdStore } from '../../src/store/etcd/etcd-store.js';
import { EtcdCluster } from '../helpers/etcd-cluster.js';
import { eventually } from '../helpers/redis-store.js';
import { withWords, type Worded } from '../helpers/store-words.js';

/** With etcd gone, every acquire path of the one engine fails closed: a 503, never a grant. */
let cluster: EtcdCluster;
let store: Worded<EtcdStore>;

beforeAll(async () => {
  cluster = await EtcdCluster.start(1);
  store = withWords(new EtcdStore({ endpoints: cluster.endpoints, keyPrefix: 'gone/', commandTimeoutMs: 1_000, fenceGraceMs: 60_000 }));
  await eventually(() => store.ping(), 10_000);
}, 60_000);
afterAll(async () => {
  await store?.close();
  await cluster?.stop();
});

describe('etcd store: etcd unreachable', () => {
  it('a lock, a lock set, a permit and their renewals and releases answer StoreUnavailableError', async () => {
    const ownerToken = 'o'.repeat(22);
    expect(await store.acquire({ id: 'ns/held', ownerToken, ttlMs: 30_000, holder: null })).toMatchObject({ acquired: true });
    await cluster.stop();
    const calls: Array<[string, () => Promise<unknown>]> = [
      ['acquire', () => store.acquire({ id: 'ns/free', ownerToken, ttlMs: 5_000, holder: null })],
      ['acquire waiting', () => store.acquire({ id: 'ns/held', ownerToken: 'p'.repeat(22), ttlMs: 5_000, holder: null, waitMs: 2_000 })],
      ['acquireSet', () => store.acquireSet({ ids: ['ns/a', 'ns/b'], ownerToken, ttlMs: 5_000, holder: null })],
      [
        'acquirePermit',
        () =>
          store.permits.acquirePermit({ kind: 'semaphore', id: 'ns/s', ownerToken, ttlMs: 5_000, holder: null, weight: 1, capacity: 3 }),
      ],
      ['renew', () => store.renew('ns/held', ownerToken, 5_000)],
      ['release', () => store.release('ns/held', ownerToken)],
      ['inspect', () => store.inspect('ns/held')],
    ];
    for (const [name, call] of calls) {
      const err = await call().then(
        (answer) => answer,
        (e: unknown) => e,
      );
      expect(err, name).toBeInstanceOf(StoreUnavailableError);
    }
  }, 60_000);
});

describe('etcd store: a watch begun while etcd is unreachable', () => {
  it('is refused with StoreUnavailableError within the command timeout, not left waiting for etcd', async () => {
    // (The cluster was stopped by the test before.)
    const started = performance.now();
    const outcome = await Promise.race([
      store.leases
        .watchChanges('lock', 'ns/watched', () => undefined)
        .then(
          (stop) => {
            stop();
            return 'watching';
          },
          (err: unknown) => err,
        ),
      new Promise((resolve) => setTimeout(() => resolve('still waiting'), 8_000)),
    ]);
    expect(outcome).toBeInstanceOf(StoreUnavailableError);
    expect(performance.now() - started).toBeLessThan(8_000);
  }, 30_000);

  it('a watch refused is not left in the etcd client (five refused: none left waiting to connect)', async () => {
    const manager = (store as unknown as { client: { watchManager: { watchers: unknown[] } } }).client.watchManager;
    const before = manager.watchers.length;
    for (let i = 0; i < 5; i++) {
      await expect(store.leases.watchChanges('lock', `ns/refused-${i}`, () => undefined)).rejects.toBeInstanceOf(StoreUnavailableError);
    }
    await vi.waitFor(() => expect(manager.watchers.length).toBe(before), { timeout: 5_000 });
  }, 30_000);
});
