import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Etcd3 } from 'etcd3';
import { EtcdStore } from '../../src/store/etcd/etcd-store.js';
import { EtcdCluster } from '../helpers/etcd-cluster.js';
import { eventually } from '../helpers/redis-store.js';
import { withWords, type Worded } from '../helpers/store-words.js';

/**
 * Records written before locks were pools of one lease (`lock/<id>`: {o, e, h, t?, k, i?, d?}, and
 * waiters under `queue/<id>#`) are read as they were meant: no lease they hold is lost or granted twice,
 * and tokens keep going up from theirs.
 */
const PREFIX = 'old-layout/';
let cluster: EtcdCluster;
let client: Etcd3;
let store: Worded<EtcdStore>;

beforeAll(async () => {
  cluster = await EtcdCluster.startShared(1);
  client = new Etcd3({ hosts: cluster.endpoints });
  store = withWords(new EtcdStore({ endpoints: cluster.endpoints, keyPrefix: PREFIX, commandTimeoutMs: 2_000, fenceGraceMs: 60_000 }));
  await eventually(() => store.ping(), 10_000);
}, 60_000);
afterAll(async () => {
  await store?.close();
  client?.close();
  await cluster?.stop();
});

/** Writes an old lock record; its token (when it has no `t`) is the put's revision, as the old store read it. */
async function writeOld(id: string, record: object): Promise<number> {
  const put = await client.put(`${PREFIX}lock/${id}`).value(JSON.stringify(record)).exec();
  return Number(put.header.revision);
}

const owner = (c: string) => c.repeat(22);

describe('etcd store: lock records of the layout before pools', () => {
  it('a live lease is kept: refused to others, renewed, replayed and released by its owner; later tokens are higher', async () => {
    const id = 'ns/held';
    const e = Date.now() + 20_000;
    const token = await writeOld(id, { o: owner('a'), e, h: 'old-holder', k: e + 60_000, i: 'scope:print' });
    expect(await store.inspect(id)).toMatchObject({ holder: 'old-holder', fencingToken: token, expiresAtMs: e });
    expect(await store.acquire({ id, ownerToken: owner('b'), ttlMs: 5_000, holder: null })).toMatchObject({ acquired: false });
    const replay = await store.acquire({ id, ownerToken: owner('c'), ttlMs: 5_000, holder: null, idempotencyKey: 'scope:print' });
    expect(replay).toMatchObject({ acquired: true, fencingToken: token, replayed: { ownerToken: owner('a'), holder: 'old-holder' } });
    expect(await store.renew(id, owner('a'), 30_000)).toMatchObject({ renewed: true, fencingToken: token });
    expect(await store.inspect(id)).toMatchObject({ holder: 'old-holder', fencingToken: token });
    expect(await store.acquire({ id, ownerToken: owner('b'), ttlMs: 5_000, holder: null })).toMatchObject({ acquired: false });
    expect(await store.release(id, owner('a'))).toBe(true);
    expect((await store.inspectIndexed(id)).lastFencingToken).toBe(token);
    const next = await store.acquire({ id, ownerToken: owner('b'), ttlMs: 5_000, holder: null });
    expect(next.acquired).toBe(true);
    if (next.acquired) expect(next.fencingToken).toBeGreaterThan(token);
  });

  it("a released lock's last token is kept for the watch index, and the next grant is above it", async () => {
    const id = 'ns/released';
    await writeOld(id, { o: '', e: Date.now() - 10, h: null, t: 7, k: Date.now() + 60_000 });
    expect(await store.inspectIndexed(id)).toEqual({ state: null, lastFencingToken: 7 });
    const grant = await store.acquire({ id, ownerToken: owner('d'), ttlMs: 5_000, holder: null });
    expect(grant.acquired).toBe(true);
    if (grant.acquired) expect(grant.fencingToken).toBeGreaterThan(7);
  });

  it("an expired lease's lock-delay still holds the key until it ends", async () => {
    const id = 'ns/delayed';
    const e = Date.now() - 100;
    const token = await writeOld(id, { o: owner('e'), e, h: null, t: 11, k: e + 60_000, d: 1_500 });
    expect(token).toBeGreaterThan(0);
    const indexed = await store.inspectIndexed(id);
    expect(indexed).toMatchObject({ state: null, lastFencingToken: 11, lockDelayUntilMs: e + 1_500 });
    expect(await store.acquire({ id, ownerToken: owner('f'), ttlMs: 5_000, holder: null })).toMatchObject({ acquired: false });
    await new Promise((r) => setTimeout(r, Math.max(0, e + 1_600 - Date.now())));
    expect(await store.acquire({ id, ownerToken: owner('f'), ttlMs: 5_000, holder: null })).toMatchObject({ acquired: true });
  });

  it('a caller queued in the old layout is handed the lock in its turn', async () => {
    const id = 'ns/queued';
    const e = Date.now() + 20_000;
    await writeOld(id, { o: owner('g'), e, h: null, k: e + 60_000 });
    const lease = client.lease(10);
    const leaseId = await lease.grant();
    const waiter = { o: owner('h'), ttl: 5_000, d: Date.now() + 20_000, h: 'old-waiter', s: Date.now() };
    await client.put(`${PREFIX}queue/${id}#oldwaiter`).value(JSON.stringify(waiter)).lease(leaseId).exec();
    expect((await store.inspect(id))?.waiters).toBe(1);
    expect(await store.queue(id, 10)).toEqual([{ position: 1, holder: 'old-waiter', waitingSinceMs: waiter.s }]);
    expect(await store.release(id, owner('g'))).toBe(true);
    expect(await store.inspect(id)).toMatchObject({ holder: 'old-waiter', waiters: 0 });
    await lease.revoke();
  });
});
