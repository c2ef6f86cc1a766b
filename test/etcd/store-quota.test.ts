import type { Etcd3 } from 'etcd3';
import { describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/domain/errors.js';
import { EtcdStore } from '../../src/store/etcd/etcd-store.js';
import type { EtcdCluster } from '../helpers/etcd-cluster.js';
import { ALIGNED_START_MS, etcdForFile, beforeEachTxn, openOnFakeClock, rawJson, rawKey } from '../helpers/etcd-store-fixtures.js';

/**
 * The namespace quota's slots on etcd (EtcdStore.reserveQuotaSlot, extendQuotaSlot, retireQuotaSlot,
 * sweep): one key per counted lease, `{"e": end}`, under a version key every reservation compares and
 * bumps. The store's clock is a fake one here, so that "ended" is exact to the millisecond; etcd and its
 * leases run on real time.
 */
let cluster: EtcdCluster;
let raw: Etcd3;
const opened: EtcdStore[] = [];
let prefixes = 0;

etcdForFile(opened, (shared, client) => {
  cluster = shared;
  raw = client;
});

/** A store of its own (its own key prefix) on a fake clock at a whole second. */
const open = (prefix = `quota-${++prefixes}/`) => openOnFakeClock(cluster, opened, prefix);

const T = ALIGNED_START_MS;

describe('etcd store: reserving quota slots', () => {
  it('a slot asked for again is counted once (a renewal of the lease it counts), not twice', async () => {
    const { store } = await open();
    expect(await store.reserveQuotaSlot('ns', 'a', 10_000, 1)).toEqual({ reserved: true });
    expect(await store.reserveQuotaSlot('ns', 'a', 10_000, 1)).toEqual({ reserved: true });
    expect(await store.reserveQuotaSlot('ns', 'b', 10_000, 1)).toMatchObject({ reserved: false });
  });

  it('a reservation in a quiet namespace costs one read and one write; a refused one, the read alone', async () => {
    const { store } = await open();
    expect(await store.reserveQuotaSlot('ns', 'a', 10_000, 2)).toEqual({ reserved: true });
    let hook = beforeEachTxn(store, () => undefined);
    expect(await store.reserveQuotaSlot('ns', 'b', 10_000, 2)).toEqual({ reserved: true });
    hook.restore();
    expect(hook.count()).toBe(2);
    hook = beforeEachTxn(store, () => undefined);
    expect(await store.reserveQuotaSlot('ns', 'c', 10_000, 2)).toEqual({ reserved: false, retryAfterMs: 10_000 });
    hook.restore();
    expect(hook.count()).toBe(1);
  });

  it('a slot that ended at this very millisecond no longer counts, and the next reservation drops it', async () => {
    const { store, clock, prefix } = await open();
    expect(await store.reserveQuotaSlot('ns', 'x', 100, 1)).toEqual({ reserved: true });
    clock.set(T + 100);
    // Still in etcd (its etcd lease outlives its end by seconds), ended on the store's clock.
    expect(await rawJson(raw, `${prefix}slot/ns#x`)).toEqual({ e: T + 100 });
    expect(await store.reserveQuotaSlot('ns', 'y', 10_000, 1)).toEqual({ reserved: true });
    expect(await rawKey(raw, `${prefix}slot/ns#x`)).toBeNull();
    expect(await rawJson(raw, `${prefix}slot/ns#y`)).toEqual({ e: T + 10_100 });
  });

  it('an ended slot asked for again is written anew while the other ended ones are dropped', async () => {
    const { store, clock, prefix } = await open();
    expect(await store.reserveQuotaSlot('ns', 'x', 100, 2)).toEqual({ reserved: true });
    expect(await store.reserveQuotaSlot('ns', 'z', 100, 2)).toEqual({ reserved: true });
    clock.set(T + 200);
    expect(await store.reserveQuotaSlot('ns', 'x', 10_000, 1)).toEqual({ reserved: true });
    expect(await rawJson(raw, `${prefix}slot/ns#x`)).toEqual({ e: T + 10_200 });
    expect(await rawKey(raw, `${prefix}slot/ns#z`)).toBeNull();
  });

  it('an unreadable slot record counts as ended: it neither blocks the namespace nor fails the reservation', async () => {
    const { store, prefix } = await open();
    await raw.put(`${prefix}slot/ns#garbled`).value('not json');
    expect(await store.reserveQuotaSlot('ns', 'a', 10_000, 1)).toEqual({ reserved: true });
    expect(await rawKey(raw, `${prefix}slot/ns#garbled`)).toBeNull();
  });

  it('a full namespace is refused with the wait until its earliest slot ends', async () => {
    const { store, clock } = await open();
    expect(await store.reserveQuotaSlot('ns', 'a', 5_000, 2)).toEqual({ reserved: true });
    expect(await store.reserveQuotaSlot('ns', 'b', 3_000, 2)).toEqual({ reserved: true });
    clock.advance(1_000);
    expect(await store.reserveQuotaSlot('ns', 'c', 10_000, 2)).toEqual({ reserved: false, retryAfterMs: 2_000 });
  });

  it('a refused reservation writes nothing: the version key and the ended slots stay as they were', async () => {
    const { store, clock, prefix } = await open();
    expect(await store.reserveQuotaSlot('ns', 'a', 10_000, 2)).toEqual({ reserved: true });
    expect(await store.reserveQuotaSlot('ns', 'ended', 100, 2)).toEqual({ reserved: true });
    clock.set(T + 200);
    const before = await rawKey(raw, `${prefix}slotver/ns`);
    expect(await store.reserveQuotaSlot('ns', 'b', 10_000, 1)).toEqual({ reserved: false, retryAfterMs: 9_800 });
    expect((await rawKey(raw, `${prefix}slotver/ns`))?.mod_revision).toBe(before?.mod_revision);
    expect(await rawKey(raw, `${prefix}slot/ns#ended`)).not.toBeNull();
  });

  it('two instances racing for the last slot of a namespace: the one that lost the race is refused', async () => {
    const a = await open();
    const b = await open(a.prefix);
    let first: unknown;
    const hook = beforeEachTxn(b.store, async (request) => {
      // Instance A takes the last slot between B's read and B's write.
      if (request.compare && first === undefined) first = await a.store.reserveQuotaSlot('ns', 'a', 10_000, 1);
    });
    expect(await b.store.reserveQuotaSlot('ns', 'b', 10_000, 1)).toEqual({ reserved: false, retryAfterMs: 10_000 });
    hook.restore();
    expect(first).toEqual({ reserved: true });
    expect(await rawKey(raw, `${a.prefix}slot/ns#b`)).toBeNull();
    expect(await rawJson(raw, `${a.prefix}slot/ns#a`)).toEqual({ e: T + 10_000 });
  });

  it('under contention that never ends it gives up after 64 rounds with a 503', async () => {
    const { store, prefix } = await open();
    let writes = 0;
    const hook = beforeEachTxn(store, async (request) => {
      if (!request.compare) return;
      writes++;
      if (writes > 70) throw new Error('more rounds than MAX_CAS_ROUNDS');
      // Another instance reserves in the namespace meanwhile: the version key moves every round.
      await raw.put(`${prefix}slotver/ns`).value(String(writes));
    });
    const outcome = await store.reserveQuotaSlot('ns', 'a', 10_000, 5).catch((err: unknown) => err);
    hook.restore();
    expect(outcome).toBeInstanceOf(StoreUnavailableError);
    expect((outcome as Error).message).toMatch(/too much contention/);
    expect(writes).toBe(64);
    expect(await rawKey(raw, `${prefix}slot/ns#a`)).toBeNull();
  }, 30_000);
});

describe('etcd store: extending quota slots', () => {
  it("an extension moves the slot's end, in one read and one write", async () => {
    const { store, prefix } = await open();
    expect(await store.reserveQuotaSlot('ns', 'a', 1_000, 1)).toEqual({ reserved: true });
    const hook = beforeEachTxn(store, () => undefined);
    await store.extendQuotaSlot('ns', 'a', T + 5_000);
    hook.restore();
    expect(await rawJson(raw, `${prefix}slot/ns#a`)).toEqual({ e: T + 5_000 });
    expect(hook.count()).toBe(2);
  });

  it('an extension to the end the slot already has, or an earlier one, writes nothing', async () => {
    const { store, prefix } = await open();
    expect(await store.reserveQuotaSlot('ns', 'a', 5_000, 1)).toEqual({ reserved: true });
    const before = await rawKey(raw, `${prefix}slot/ns#a`);
    await store.extendQuotaSlot('ns', 'a', T + 5_000);
    await store.extendQuotaSlot('ns', 'a', T + 4_000);
    expect((await rawKey(raw, `${prefix}slot/ns#a`))?.mod_revision).toBe(before?.mod_revision);
    expect(await rawJson(raw, `${prefix}slot/ns#a`)).toEqual({ e: T + 5_000 });
  });

  it('a missing slot, or an unreadable one, is counted again', async () => {
    const { store, prefix } = await open();
    await store.extendQuotaSlot('ns', 'gone', T + 5_000);
    expect(await rawJson(raw, `${prefix}slot/ns#gone`)).toEqual({ e: T + 5_000 });
    await raw.put(`${prefix}slot/ns#garbled`).value('{');
    await store.extendQuotaSlot('ns', 'garbled', T + 6_000);
    expect(await rawJson(raw, `${prefix}slot/ns#garbled`)).toEqual({ e: T + 6_000 });
  });

  it('a retired slot is not counted again by a renewal, which costs one read and writes nothing', async () => {
    const { store, prefix } = await open();
    expect(await store.reserveQuotaSlot('ns', 'a', 1_000, 1)).toEqual({ reserved: true });
    await store.retireQuotaSlot('ns', 'a', T + 10_000);
    const hook = beforeEachTxn(store, () => undefined);
    await store.extendQuotaSlot('ns', 'a', T + 20_000);
    hook.restore();
    expect(await rawKey(raw, `${prefix}slot/ns#a`)).toBeNull();
    expect(hook.count()).toBe(1);
  });

  it('a retirement between the renewal’s read and its write wins: the slot is not written back', async () => {
    const { store, prefix } = await open();
    expect(await store.reserveQuotaSlot('ns', 'a', 1_000, 1)).toEqual({ reserved: true });
    let retired = false;
    const hook = beforeEachTxn(store, async (request) => {
      if (!request.compare || retired) return;
      retired = true;
      await store.retireQuotaSlot('ns', 'a', T + 10_000);
    });
    await store.extendQuotaSlot('ns', 'a', T + 5_000);
    hook.restore();
    expect(retired).toBe(true);
    expect(await rawKey(raw, `${prefix}slot/ns#a`)).toBeNull();
    expect(await rawJson(raw, `${prefix}slotoff/ns#a`)).toEqual({ r: T + 10_000 });
  });

  it('a slot changed between the renewal’s read and its write is read and decided again', async () => {
    const { store, prefix } = await open();
    expect(await store.reserveQuotaSlot('ns', 'a', 1_000, 1)).toEqual({ reserved: true });
    let changed = false;
    const hook = beforeEachTxn(store, async (request) => {
      if (!request.compare || changed) return;
      changed = true;
      await raw.put(`${prefix}slot/ns#a`).value(JSON.stringify({ e: T + 2_000 }));
    });
    await store.extendQuotaSlot('ns', 'a', T + 5_000);
    hook.restore();
    expect(changed).toBe(true);
    expect(await rawJson(raw, `${prefix}slot/ns#a`)).toEqual({ e: T + 5_000 });
  });

  it('under contention that never ends it gives up after 64 rounds with a 503, never taken for done', async () => {
    const { store, prefix } = await open();
    expect(await store.reserveQuotaSlot('ns', 'a', 1_000, 1)).toEqual({ reserved: true });
    let writes = 0;
    const hook = beforeEachTxn(store, async (request) => {
      if (!request.compare) return;
      writes++;
      if (writes > 70) throw new Error('more rounds than MAX_CAS_ROUNDS');
      await raw.put(`${prefix}slot/ns#a`).value(JSON.stringify({ e: T + writes }));
    });
    await expect(store.extendQuotaSlot('ns', 'a', T + 5_000)).rejects.toBeInstanceOf(StoreUnavailableError);
    hook.restore();
    expect(writes).toBe(64);
  }, 30_000);
});

describe('etcd store: retiring quota slots', () => {
  it('retiring a slot whose lease has already ended frees it and leaves no retired mark', async () => {
    const { store, prefix } = await open();
    expect(await store.reserveQuotaSlot('ns', 'a', 1_000, 2)).toEqual({ reserved: true });
    expect(await store.reserveQuotaSlot('ns', 'b', 1_000, 2)).toEqual({ reserved: true });
    await store.retireQuotaSlot('ns', 'a', T);
    await store.retireQuotaSlot('ns', 'b', T - 1);
    for (const id of ['a', 'b']) {
      expect(await rawKey(raw, `${prefix}slot/ns#${id}`)).toBeNull();
      expect(await rawKey(raw, `${prefix}slotoff/ns#${id}`)).toBeNull();
    }
  });

  it('a retired mark is kept until its end, then swept', async () => {
    const { store, clock, prefix } = await open();
    expect(await store.reserveQuotaSlot('ns', 'a', 1_000, 1)).toEqual({ reserved: true });
    await store.retireQuotaSlot('ns', 'a', T + 1_000);
    expect(await rawKey(raw, `${prefix}slot/ns#a`)).toBeNull();
    expect(await rawJson(raw, `${prefix}slotoff/ns#a`)).toEqual({ r: T + 1_000 });
    await store.sweep();
    expect(await rawKey(raw, `${prefix}slotoff/ns#a`)).not.toBeNull();
    clock.set(T + 1_000);
    await store.sweep();
    expect(await rawKey(raw, `${prefix}slotoff/ns#a`)).toBeNull();
  });
});
