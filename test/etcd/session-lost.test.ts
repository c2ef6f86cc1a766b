import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { StoreUnavailableError } from '../../src/domain/errors.js';
import { EtcdStore } from '../../src/store/etcd/etcd-store.js';
import { EtcdCluster } from '../helpers/etcd-cluster.js';
import { eventually } from '../helpers/redis-store.js';
import { withWords, type Worded } from '../helpers/store-words.js';

/**
 * Queued callers' records hang on the instance's session lease (3 s, kept alive by the client). When it
 * ends while the instance lives (etcd away longer than that, an event loop stalled as long), etcd deletes
 * every one of them: nothing hands those callers the key any more. They were left waiting out their whole
 * waitMs and then told "not acquired", the key free meanwhile. They are told at once instead (503: their
 * place in the queue went with the session), and may ask again.
 */
let cluster: EtcdCluster;
let raw: Etcd3;
let store: Worded<EtcdStore>;
let inner: EtcdStore;

beforeAll(async () => {
  cluster = await EtcdCluster.startShared(1);
  raw = new Etcd3({ hosts: cluster.endpoints });
  inner = new EtcdStore({ endpoints: cluster.endpoints, keyPrefix: 'session/', commandTimeoutMs: 1_000, fenceGraceMs: 60_000 });
  store = withWords(inner);
  await eventually(() => store.ping(), 10_000);
}, 60_000);
afterAll(async () => {
  await store?.close();
  raw?.close();
  await cluster?.stop();
});

describe('etcd store: the session lease lost while callers wait', () => {
  it('every caller waiting on it is answered StoreUnavailableError at once, not left to its waitMs', async () => {
    const id = 'ns/queued';
    expect(await store.acquire({ id, ownerToken: 'h'.repeat(22), ttlMs: 30_000, holder: null })).toMatchObject({ acquired: true });
    const started = performance.now();
    const waiting = store.acquire({ id, ownerToken: 'w'.repeat(22), ttlMs: 30_000, holder: null, waitMs: 20_000 }).then(
      (outcome) => outcome,
      (err: unknown) => err,
    );
    await vi.waitFor(async () => expect(await store.queue(id, 10)).toHaveLength(1), { timeout: 10_000, interval: 50 });
    // What the session's expiry does: etcd ends the lease and deletes every key on it.
    const session = await (inner as unknown as { sessionLease(): Promise<string> }).sessionLease();
    await raw.leaseClient.leaseRevoke({ ID: session });
    const outcome = await waiting;
    expect(outcome).toBeInstanceOf(StoreUnavailableError);
    expect(performance.now() - started).toBeLessThan(15_000);
    // Asked again, the caller queues on a new session and is handed the key when its holder lets go.
    const again = store.acquire({ id, ownerToken: 'v'.repeat(22), ttlMs: 30_000, holder: null, waitMs: 20_000 });
    await vi.waitFor(async () => expect(await store.queue(id, 10)).toHaveLength(1), { timeout: 10_000, interval: 50 });
    expect(await store.release(id, 'h'.repeat(22))).toBe(true);
    expect(await again).toMatchObject({ acquired: true });
  }, 30_000);
});
