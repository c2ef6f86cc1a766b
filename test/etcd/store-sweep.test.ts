import type { Etcd3 } from 'etcd3';
import { describe, expect, it } from 'vitest';
import { EtcdStore } from '../../src/store/etcd/etcd-store.js';
import type { EtcdCluster } from '../helpers/etcd-cluster.js';
import { ALIGNED_START_MS, etcdForFile, beforeEachTxn, openOnFakeClock, rawJson, rawKey } from '../helpers/etcd-store-fixtures.js';
import { withWords } from '../helpers/store-words.js';

/**
 * EtcdStore.sweep: lock records past their grace, ended quota slots and retired marks past their end go
 * now (etcd's own lease expiry does it too, to the second); nothing else does. The store's clock is a
 * fake one, so that "past" is exact to the millisecond.
 */
let cluster: EtcdCluster;
let raw: Etcd3;
const opened: EtcdStore[] = [];
let prefixes = 0;
const T = ALIGNED_START_MS;

etcdForFile(opened, (shared, client) => {
  cluster = shared;
  raw = client;
});

const open = () => openOnFakeClock(cluster, opened, `sweep-${++prefixes}/`);

describe('etcd store: sweep', () => {
  it('drops what is past its keep-until (at this very millisecond too), keeps what is not and what has none', async () => {
    const { store, clock, prefix } = await open();
    const words = withWords(store);
    // A lock record is kept until its end plus the grace (1 s here).
    expect(await words.acquire({ id: 'ns/old', ownerToken: 'o'.repeat(22), ttlMs: 1_000, holder: null })).toMatchObject({ acquired: true });
    expect(await words.acquire({ id: 'ns/live', ownerToken: 'l'.repeat(22), ttlMs: 10_000, holder: null })).toMatchObject({
      acquired: true,
    });
    expect(await store.reserveQuotaSlot('ns', 'ended', 500, 10)).toEqual({ reserved: true });
    expect(await store.reserveQuotaSlot('ns', 'live', 10_000, 10)).toEqual({ reserved: true });
    // A record nobody can read, and the namespace's version key (a number): neither has a keep-until.
    await raw.put(`${prefix}lock/ns/garbled`).value('not json');
    clock.set(T + 2_000);
    await store.sweep();
    expect(await rawKey(raw, `${prefix}lock/ns/old`)).toBeNull();
    expect(await rawKey(raw, `${prefix}slot/ns#ended`)).toBeNull();
    expect(await rawKey(raw, `${prefix}lock/ns/live`)).not.toBeNull();
    expect(await rawJson(raw, `${prefix}slot/ns#live`)).toEqual({ e: T + 10_000 });
    expect(await rawKey(raw, `${prefix}lock/ns/garbled`)).not.toBeNull();
    expect(await rawKey(raw, `${prefix}slotver/ns`)).not.toBeNull();
    expect(await words.inspect('ns/live')).toMatchObject({ holder: null });
  });

  it('a record renewed between the sweep’s read and its delete is kept', async () => {
    const { store, clock, prefix } = await open();
    expect(await store.reserveQuotaSlot('ns', 'a', 500, 10)).toEqual({ reserved: true });
    clock.set(T + 1_000);
    let renewed = false;
    const hook = beforeEachTxn(store, async () => {
      if (renewed) return;
      renewed = true;
      await raw.put(`${prefix}slot/ns#a`).value(JSON.stringify({ e: T + 50_000 }));
    });
    await store.sweep();
    hook.restore();
    expect(renewed).toBe(true);
    expect(await rawJson(raw, `${prefix}slot/ns#a`)).toEqual({ e: T + 50_000 });
  });
});
