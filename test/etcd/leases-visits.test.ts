import { describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/domain/errors.js';
import { EtcdStore } from '../../src/store/etcd/etcd-store.js';
import type { EtcdCluster } from '../helpers/etcd-cluster.js';
import { engineWith, fixtureForFile, one, type LeasesFixture } from '../helpers/etcd-leases-fixtures.js';
import { FaultProxy } from '../helpers/fault-proxy.js';
import { eventually } from '../helpers/redis-store.js';
import { freePort } from '../helpers/redis-server.js';

/**
 * The etcd lease engine on the real clock: a caller waiting for a key whose lease expired with a
 * lock-delay is handed it when the delay ends (the visit made when the lease ran out schedules the next
 * at the delay's end); etcd's watch on a record tells of a reconnect (changes may have been missed), and
 * a watch etcd never answers is given up at the call's deadline.
 */
let cluster: EtcdCluster;
let f: LeasesFixture;
fixtureForFile('lvi/', undefined, (made, shared) => {
  f = made;
  cluster = shared;
});

describe('etcd lease engine: visits', () => {
  it('a caller waiting through a lock-delay is handed the lock when the delay ends', async () => {
    // An engine with no heartbeat: only the visits the engine schedules itself hand the lock over.
    const { engine } = engineWith(f.store, async () => undefined);
    const id = 'ns/delayed';
    expect(await engine.acquire(one('lock', id, 'A', { ttlMs: 1_000, lockDelayMs: 1_000 }))).toMatchObject({ acquired: true });
    const out = await engine.acquire(one('lock', id, 'W', { waitMs: 8_000 }));
    expect(out).toMatchObject({ acquired: true, queued: true });
    await engine.closeAll(new Error('done'));
  });
});

describe('etcd lease engine: a watch etcd never answers', () => {
  it("is given up at the call's deadline with a 503", async () => {
    const store = new EtcdStore({
      endpoints: [`http://127.0.0.1:${await freePort()}`],
      keyPrefix: 'lvi-down/',
      commandTimeoutMs: 500,
      fenceGraceMs: 60_000,
    });
    try {
      const hung = new Promise<'hung'>((r) => setTimeout(() => r('hung'), 8_000).unref());
      const opened = store.engine
        .watchChanges('lock', 'ns/w', () => undefined)
        .then(
          (cancel) => {
            cancel();
            return 'opened';
          },
          (err: unknown) => err,
        );
      expect(await Promise.race([opened, hung])).toBeInstanceOf(StoreUnavailableError);
    } finally {
      await store.close();
    }
  });
});

describe("etcd lease engine: etcd's watch on a record", () => {
  it('tells of a reconnect after its connection was lost, with nothing changed (a change may have been missed)', async () => {
    const proxy = await FaultProxy.start(cluster.members[0]?.clientPort as number);
    const store = new EtcdStore({
      endpoints: [proxy.url.replace(/^redis:/, 'http:')],
      keyPrefix: 'lvi-proxy/',
      commandTimeoutMs: 2_000,
      fenceGraceMs: 60_000,
    });
    try {
      await eventually(() => store.ping(), 10_000);
      let told = 0;
      const cancel = await store.engine.watchChanges('lock', 'ns/reconnects', () => told++);
      const before = told;
      proxy.resetAll();
      await eventually(async () => expect(told).toBeGreaterThan(before), 10_000);
      cancel();
    } finally {
      await store.close();
      await proxy.close();
    }
  });
});
