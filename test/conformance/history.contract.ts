import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  type HistoryAppend,
  type HistoryKey,
  type HistoryLimits,
  type HistoryRecord,
  type HistoryStore,
  HistoryRecorder,
  leaseIdOf,
  timeline,
} from '../../src/domain/history.js';
import { newOwnerToken } from '../../src/domain/lock-service.js';

/**
 * One contract for every store's lease history (HistoryStore): each recorded kind read back as written,
 * the derived kinds (handed over, expired, lock-delay) from what the store returns, and the retention
 * bounds: events per key, keys per namespace, and time.
 */
export interface HistoryHarness {
  open(limits: HistoryLimits): Promise<HistoryStore>;
  /** Whether the store keeps anything for the key (to see an idle key dropped, not just filtered). */
  stored(store: HistoryStore, key: HistoryKey): Promise<boolean>;
  /** The most keys of one namespace the store keeps for `keysPerNamespace` (Redis counts per quota shard). */
  keysKept(keysPerNamespace: number): number;
  /** False when the keys of one write are equally recent (etcd: one revision), so the cap keeps any of them. */
  ranksWithinBatch?: boolean;
}

const LIMITS: HistoryLimits = { eventsPerKey: 20, keysPerNamespace: 1_000, retentionMs: 3_600_000 };

export function describeHistoryContract(name: string, harness: HistoryHarness): void {
  describe(`history contract: ${name}`, () => {
    let store: HistoryStore;
    beforeAll(async () => {
      store = await harness.open(LIMITS);
    });
    afterAll(async () => {
      await store.close();
    });

    const keyOf = (primitive: HistoryKey['primitive'] = 'lock', namespace = `ns-${randomUUID().slice(0, 8)}`): HistoryKey => ({
      namespace,
      primitive,
      key: `k:${randomUUID()}`,
    });
    const write = (key: HistoryKey, ...records: HistoryRecord[]) => store.append(records.map((record) => ({ ...key, record })));

    it('keeps each recorded kind with every field, in order; a lease is named by a digest, never its owner token', async () => {
      const key = keyOf('rwlock');
      const ownerToken = newOwnerToken();
      const t = Date.now();
      const records: HistoryRecord[] = [
        {
          kind: 'granted',
          at: t,
          lease: leaseIdOf(ownerToken),
          fencingToken: 7,
          holder: 'billing-1',
          expiresAt: t + 30_000,
          waitedMs: 12,
          lockDelayMs: 500,
          mode: 'write',
          set: true,
        },
        { kind: 'renewed', at: t + 10, lease: leaseIdOf(ownerToken), fencingToken: 7, expiresAt: t + 30_010 },
        { kind: 'released', at: t + 20, lease: leaseIdOf(ownerToken), set: true },
        { kind: 'granted', at: t + 30, lease: leaseIdOf(newOwnerToken()), fencingToken: 8, holder: null, expiresAt: t + 60_000 },
        { kind: 'force_released', at: t + 40, fencingToken: 8, holder: null, by: 'operator' },
      ];
      await write(key, ...records);
      const read = await store.read(key);
      expect(read).toEqual(records);
      expect(JSON.stringify(read)).not.toContain(ownerToken);
      const events = timeline(read, t + 100);
      expect(events.map((e) => e.type)).toEqual(['granted', 'renewed', 'released', 'granted', 'force_released']);
      expect(events[2]).toMatchObject({ fencingToken: 7, holder: 'billing-1', heldMs: 20, mode: 'write' });
      expect(events[4]).toMatchObject({ fencingToken: 8, by: 'operator', heldMs: 10 });
    });

    it("pairs a release with its lease through the renewals once the grant is trimmed; leaves out a set's release on a key the set never held", async () => {
      const key = keyOf();
      const long = newOwnerToken();
      const other = newOwnerToken();
      const t = Date.now() - 60_000;
      // The lease's grant is older than the LIMITS.eventsPerKey events kept: only its renewals are read back.
      const renewals: HistoryRecord[] = Array.from({ length: LIMITS.eventsPerKey }, (_, i) => ({
        kind: 'renewed',
        at: t + 100 * (i + 1),
        lease: leaseIdOf(long),
        fencingToken: 3,
        expiresAt: t + 100 * (i + 1) + 400,
      }));
      await write(
        key,
        { kind: 'granted', at: t, lease: leaseIdOf(long), fencingToken: 3, holder: 'long-job', expiresAt: t + 400 },
        ...renewals.slice(0, -1),
      );
      // A set holding other keys named this one too in its release (before this lease's end).
      await write(key, { kind: 'released', at: t + 100 * LIMITS.eventsPerKey - 50, lease: leaseIdOf(other), set: true });
      await write(key, renewals.at(-1) as HistoryRecord, {
        kind: 'released',
        at: t + 100 * LIMITS.eventsPerKey + 10,
        lease: leaseIdOf(long),
      });
      const read = await store.read(key);
      expect(read.some((r) => r.kind === 'granted')).toBe(false);
      const events = timeline(read, Date.now());
      expect(events.filter((e) => e.type === 'expired')).toEqual([]);
      // Ended by its release, with its holder and time held though its grant is gone.
      expect(events.filter((e) => e.type === 'released')).toEqual([
        expect.objectContaining({ fencingToken: 3, holder: 'long-job', heldMs: 100 * LIMITS.eventsPerKey + 10 }),
      ]);
    });

    it('a lease with a lock-delay renewed past the events kept per key, then expired: its expiry, then its lock-delay', async () => {
      // Its renewals written over many batches (the store trims at each), or all in one (trimmed as written).
      for (const perBatch of [3, Infinity]) {
        const key = keyOf();
        const lease = leaseIdOf(newOwnerToken());
        const t = Date.now() - 60_000;
        const renewals = Array.from({ length: LIMITS.eventsPerKey + 5 }, (_, i): HistoryRecord => ({
          kind: 'renewed',
          at: t + 100 * (i + 1),
          lease,
          fencingToken: 5,
          expiresAt: t + 100 * (i + 1) + 400,
        }));
        const records: HistoryRecord[] = [
          { kind: 'granted', at: t, lease, fencingToken: 5, holder: 'cron', expiresAt: t + 400, lockDelayMs: 2_000 },
          // An operator's ask names the lease by its fencing token only.
          { kind: 'release_requested', at: t + 50, fencingToken: 5, by: 'ops', reason: null },
          ...renewals,
        ];
        for (let from = 0; from < records.length; from += perBatch) await write(key, ...records.slice(from, from + perBatch));
        // The next lease, granted once the lock-delay was over, with none of its own.
        const next = leaseIdOf(newOwnerToken());
        const end = t + 100 * renewals.length + 400;
        await write(
          key,
          { kind: 'granted', at: end + 2_500, lease: next, fencingToken: 6, holder: 'cron', expiresAt: end + 3_000 },
          { kind: 'renewed', at: end + 2_600, lease: next, fencingToken: 6, expiresAt: end + 3_100 },
        );
        const read = await store.read(key);
        expect(read.filter((r) => r.kind === 'granted').map((r) => r.fencingToken)).toEqual([6]);
        const events = timeline(read, Date.now()).filter((e) => e.type !== 'renewed');
        // Its holder and time held too, though its grant is gone: who held the key, and for how long.
        expect(events, `${perBatch} a batch`).toEqual([
          expect.objectContaining({ type: 'expired', at: end, fencingToken: 5, holder: 'cron', heldMs: end - t }),
          expect.objectContaining({ type: 'lock_delay', at: end, fencingToken: 5, holder: 'cron', until: end + 2_000 }),
          expect.objectContaining({ type: 'granted', fencingToken: 6 }),
          expect.objectContaining({ type: 'expired', at: end + 3_100, fencingToken: 6 }),
        ]);
      }
    });

    it('keeps any text of a holder, a reason and a key id as written, and large numbers exactly', async () => {
      const key = keyOf();
      const t = Date.now();
      const awkward = 'a|b%7C%c\nd\r\n é 漢字 {"x":1} |';
      const records: HistoryRecord[] = [
        { kind: 'granted', at: t, lease: 'l1', fencingToken: Number.MAX_SAFE_INTEGER, holder: awkward, expiresAt: t + 1, waitedMs: 0 },
        { kind: 'granted', at: t + 1, lease: 'l2', fencingToken: 0, holder: '', expiresAt: t - 5, mode: 'read' },
        { kind: 'release_requested', at: t + 2, fencingToken: 1, by: awkward, reason: awkward },
        { kind: 'release_requested', at: t + 3, fencingToken: 2, by: '', reason: null },
        { kind: 'granted', at: t + 4, lease: 'l|y', fencingToken: 3, holder: 'pipe|only', expiresAt: t + 9 },
        // Not a whole millisecond: kept as written too.
        { kind: 'released', at: t + 4.5, lease: 'l|x' },
      ];
      await write(key, ...records);
      expect(await store.read(key)).toEqual(records);
    });

    it('derives expired, lock-delay and handed over from what it kept', async () => {
      const key = keyOf();
      const t = Date.now() - 10_000;
      await write(
        key,
        { kind: 'granted', at: t, lease: 'a', fencingToken: 1, holder: 'crashed', expiresAt: t + 1_000, lockDelayMs: 2_000 },
        // Queued at t + 500, granted once the first lease's lock-delay was over.
        { kind: 'granted', at: t + 3_000, lease: 'b', fencingToken: 2, holder: 'next', expiresAt: t + 4_000, waitedMs: 2_500 },
        { kind: 'released', at: t + 3_500, lease: 'b' },
      );
      const events = timeline(await store.read(key), Date.now());
      expect(events.map((e) => `${e.type}:${e.fencingToken}`)).toEqual([
        'granted:1',
        'expired:1',
        'lock_delay:1',
        'handed_over:2',
        'released:2',
      ]);
      expect(events[1]).toMatchObject({ at: t + 1_000, heldMs: 1_000, holder: 'crashed' });
      expect(events[2]).toMatchObject({ until: t + 3_000 });
      expect(events[3]).toMatchObject({ waitedMs: 2_500, holder: 'next' });
    });

    it('a store just opened writes its first batch whole: keys of every shard at once, before any connection is made', async () => {
      // On a Cluster the batch's calls go to their masters together, each master's connection not yet
      // made: all of them are written, none refused for a connection still being made.
      const fresh = await harness.open(LIMITS);
      try {
        const namespace = `first-${randomUUID().slice(0, 8)}`;
        const keys = Array.from({ length: 64 }, (_, i): HistoryKey => ({ namespace, primitive: 'lock', key: `k${i}` }));
        const t = Date.now();
        await fresh.append(keys.map((key, i) => ({ ...key, record: { kind: 'released', at: t + i, lease: `l${i}` } })));
        const read = await Promise.all(keys.map(async (key) => (await fresh.read(key)).map((r) => r.lease)));
        expect(read).toEqual(keys.map((_, i) => [`l${i}`]));
      } finally {
        await fresh.close();
      }
    });

    it('keeps each primitive, namespace and key apart', async () => {
      const namespace = `ns-${randomUUID().slice(0, 8)}`;
      const lock = keyOf('lock', namespace);
      const sem = { ...lock, primitive: 'semaphore' as const };
      const elsewhere = { ...lock, namespace: `${namespace}-b` };
      await write(lock, { kind: 'released', at: Date.now(), lease: 'l' });
      await write(sem, { kind: 'released', at: Date.now(), lease: 's' });
      expect((await store.read(lock)).map((r) => r.lease)).toEqual(['l']);
      expect((await store.read(sem)).map((r) => r.lease)).toEqual(['s']);
      expect(await store.read(elsewhere)).toEqual([]);
    });

    it('keeps the last eventsPerKey events of a key', async () => {
      const key = keyOf();
      const t = Date.now();
      // Over two batches, as two flushes write them.
      const many = (from: number, count: number) =>
        Array.from({ length: count }, (_, i): HistoryRecord => ({ kind: 'released', at: t + from + i, lease: `l${from + i}` }));
      await write(key, ...many(0, 15));
      await write(key, ...many(15, 15));
      const kept = await store.read(key);
      expect(kept).toHaveLength(LIMITS.eventsPerKey);
      expect(kept.map((r) => r.lease)).toEqual(many(10, 20).map((r) => r.lease));
      // One batch over the cap on its own: its last eventsPerKey, none of what the key had.
      await write(key, ...many(100, LIMITS.eventsPerKey + 7));
      expect((await store.read(key)).map((r) => r.lease)).toEqual(many(107, LIMITS.eventsPerKey).map((r) => r.lease));
    });

    it('gives back a grant with its release folded in as the two events; eventsPerKey counts events', async () => {
      const key = keyOf();
      const t = Date.now();
      const pair = (i: number): HistoryRecord => ({
        kind: 'granted',
        at: t + 10 * i,
        lease: `p${i}`,
        fencingToken: i,
        holder: null,
        expiresAt: t + 10 * i + 30_000,
        // Released on the instance's clock: it may read a little before the store's grant.
        releasedAt: t + 10 * i + (i % 2 ? 3 : -1),
      });
      const expanded = (i: number): HistoryRecord[] => {
        const { releasedAt, ...grant } = pair(i);
        return [grant, { kind: 'released', at: releasedAt as number, lease: `p${i}` }];
      };
      await write(key, pair(0), { kind: 'renewed', at: t + 1, fencingToken: 0, expiresAt: t + 30_001 });
      expect(await store.read(key)).toEqual([...expanded(0), { kind: 'renewed', at: t + 1, fencingToken: 0, expiresAt: t + 30_001 }]);
      // 15 pairs over two batches: 30 events, of which the last LIMITS.eventsPerKey are read, as if stored one by one.
      await write(key, ...Array.from({ length: 7 }, (_, i) => pair(i + 1)));
      await write(key, ...Array.from({ length: 8 }, (_, i) => pair(i + 8)));
      const all = [pair(0), { kind: 'renewed', at: t + 1, fencingToken: 0, expiresAt: t + 30_001 } as HistoryRecord]
        .flatMap((r) => (r.kind === 'granted' ? expanded(0) : [r]))
        .concat(Array.from({ length: 15 }, (_, i) => expanded(i + 1)).flat());
      expect(await store.read(key)).toEqual(all.slice(-LIMITS.eventsPerKey));
    });

    it('the recorder folds a release into its grant when nothing of the key came between, and only then', async () => {
      const key = keyOf('semaphore');
      const [a, b, c] = [newOwnerToken(), newOwnerToken(), newOwnerToken()];
      const appended: HistoryAppend[][] = [];
      const counting: HistoryStore = {
        append: (batch) => {
          appended.push([...batch]);
          return store.append(batch);
        },
        read: (k) => store.read(k),
        close: () => Promise.resolve(),
      };
      const recorder = new HistoryRecorder(counting, { flushMs: 60_000, maxBuffered: 100 });
      const t = Date.now();
      const grant = (token: string, at: number) =>
        recorder.addLeaseEvent(
          { ...key, record: { kind: 'granted', at, fencingToken: at - t, holder: null, expiresAt: at + 1_000 } },
          token,
        );
      grant(a, t);
      recorder.addRelease(key, a, t + 2);
      grant(b, t + 3);
      recorder.record(key, { kind: 'renewed', at: t + 4, fencingToken: 3, expiresAt: t + 1_004 });
      // A renewal came between: b's release is a record of its own, after it.
      recorder.addRelease(key, b, t + 5);
      grant(c, t + 6);
      // Same key name and token, another namespace: never folded into c's grant.
      recorder.addRelease({ ...key, namespace: `${key.namespace}-x` }, c, t + 7);
      const read = await recorder.read(key);
      expect(appended.map((batch) => batch.length)).toEqual([6]);
      expect(appended[0]?.map((e) => `${e.record.kind}:${e.record.releasedAt ?? '-'}`)).toEqual([
        `granted:${t + 2}`,
        'granted:-',
        'renewed:-',
        'released:-',
        'granted:-',
        'released:-',
      ]);
      // The store is handed lease ids, never an owner token.
      for (const token of [a, b, c]) expect(JSON.stringify(appended)).not.toContain(token);
      const name = (lease?: string) => ({ [leaseIdOf(a)]: 'a', [leaseIdOf(b)]: 'b', [leaseIdOf(c)]: 'c' })[lease ?? ''] ?? '-';
      expect(read.map((r) => `${r.kind}:${r.at - t}:${name(r.lease)}`)).toEqual([
        'granted:0:a',
        'released:2:a',
        'granted:3:b',
        'renewed:4:-',
        'released:5:b',
        'granted:6:c',
      ]);
      await recorder.close();
    });

    it('never returns events older than the retention', async () => {
      const key = keyOf();
      const now = Date.now();
      await write(
        key,
        { kind: 'released', at: now - LIMITS.retentionMs - 1_000, lease: 'old' },
        { kind: 'released', at: now, lease: 'new' },
      );
      expect((await store.read(key)).map((r) => r.lease)).toEqual(['new']);
    });

    it('the recorder writes what gathered as one batch, and a read sees its own writes', async () => {
      const key = keyOf();
      const appended: number[] = [];
      const counting: HistoryStore = {
        append: (batch) => {
          appended.push(batch.length);
          return store.append(batch);
        },
        read: (k) => store.read(k),
        close: () => Promise.resolve(),
      };
      const recorder = new HistoryRecorder(counting, { flushMs: 60_000, maxBuffered: 100 });
      for (let i = 0; i < 5; i++) recorder.record(key, { kind: 'released', at: Date.now(), lease: `r${i}` });
      expect(await recorder.read(key)).toHaveLength(5);
      expect(appended).toEqual([5]);
      await recorder.close();
    });

    describe('bounded per namespace and in time', () => {
      const SMALL: HistoryLimits = { eventsPerKey: 5, keysPerNamespace: 2, retentionMs: 2_000 };
      /**
       * SMALL's caps with the hour's retention, for the checks of the caps alone: a batch of 520 keys and
       * its reads took over 2 s on a busy machine (load 15), past SMALL's retention, and the events it had
       * written were gone before they were read (40 appends one after another and their reads are exposed
       * the same way). The retention has tests of its own (below, and "never
       * returns events older than the retention").
       */
      const CAPPED: HistoryLimits = { ...SMALL, retentionMs: LIMITS.retentionMs };
      let small: HistoryStore;
      let capped: HistoryStore;
      beforeAll(async () => {
        [small, capped] = await Promise.all([harness.open(SMALL), harness.open(CAPPED)]);
      });
      afterAll(async () => {
        await Promise.all([small.close(), capped.close()]);
      });

      it('keeps at most keysPerNamespace keys of a namespace: the ones written last', async () => {
        const namespace = `cap-${randomUUID().slice(0, 8)}`;
        const keys = Array.from({ length: 40 }, (_, i): HistoryKey => ({ namespace, primitive: 'lock', key: `k${i}` }));
        for (const key of keys) await capped.append([{ ...key, record: { kind: 'released', at: Date.now(), lease: key.key } }]);
        const stored = await Promise.all(keys.map((key) => harness.stored(capped, key)));
        const kept = stored.filter(Boolean).length;
        expect(kept, `kept: ${stored.map((s, i) => (s ? i : '')).join(' ')}`).toBeGreaterThan(0);
        expect(kept).toBeLessThanOrEqual(harness.keysKept(SMALL.keysPerNamespace));
        expect(stored.at(-1)).toBe(true);
        // Another namespace's keys are not counted against it.
        const other: HistoryKey = { namespace: `${namespace}-x`, primitive: 'lock', key: 'k0' };
        await capped.append([{ ...other, record: { kind: 'released', at: Date.now(), lease: 'x' } }]);
        expect(await harness.stored(capped, keys.at(-1) as HistoryKey)).toBe(true);
      });

      it('one batch of many keys over namespaces: each namespace capped, each key its own events in order', async () => {
        const namespaces = [`many-${randomUUID().slice(0, 8)}`, `many-${randomUUID().slice(0, 8)}`];
        const keys = namespaces.flatMap((namespace) =>
          Array.from({ length: 260 }, (_, i): HistoryKey => ({ namespace, primitive: 'lock', key: `k${i}` })),
        );
        const t = Date.now();
        // A grant and its release per key, the keys interleaved, as a flush of many pairs holds them; 520
        // keys: more than one Redis script call takes (64 lists), more than one etcd transaction (100).
        const batch: HistoryAppend[] = keys.map((key, i) => ({
          ...key,
          record: { kind: 'granted', at: t + i, lease: `${key.namespace}${key.key}`, expiresAt: t + i + 5 },
        }));
        batch.push(
          ...keys.map((key, i): HistoryAppend => ({
            ...key,
            record: { kind: 'released', at: t + i + 1, lease: `${key.namespace}${key.key}` },
          })),
        );
        await capped.append(batch);
        for (const namespace of namespaces) {
          const mine = keys.filter((k) => k.namespace === namespace);
          const stored = await Promise.all(mine.map((key) => harness.stored(capped, key)));
          const kept = stored.filter(Boolean).length;
          expect(kept).toBeGreaterThan(0);
          expect(kept).toBeLessThanOrEqual(harness.keysKept(CAPPED.keysPerNamespace));
          // Never part of a key's history: a key kept has the grant and the release the batch gave it.
          const keptKeys = mine.filter((_, i) => stored[i]);
          for (const key of keptKeys) {
            expect((await capped.read(key)).map((r) => `${r.kind}:${r.lease}`)).toEqual([
              `granted:${namespace}${key.key}`,
              `released:${namespace}${key.key}`,
            ]);
          }
          // Written last: the batch's last key (etcd writes a part of the batch in one revision, so any of
          // that part may be the one it keeps).
          if (harness.ranksWithinBatch !== false) expect(stored.at(-1)).toBe(true);
        }
      }, 30_000);

      it('drops a key idle past the retention', async () => {
        const key: HistoryKey = { namespace: `idle-${randomUUID().slice(0, 8)}`, primitive: 'semaphore', key: 'k' };
        await small.append([{ ...key, record: { kind: 'released', at: Date.now(), lease: 'i' } }]);
        expect(await harness.stored(small, key)).toBe(true);
        // The store forgets it on its own (Redis: the list's TTL; etcd: its lease; memory: the next write
        // of the namespace), within a few retentions on a slow machine. The nudge is one key, so the
        // namespace stays within its cap: only the retention can drop the idle key.
        await vi.waitFor(
          async () => {
            await small.append([
              { namespace: key.namespace, primitive: 'lock', key: 'nudge', record: { kind: 'released', at: Date.now() } },
            ]);
            expect(await harness.stored(small, key)).toBe(false);
          },
          { timeout: 30_000, interval: 250 },
        );
      }, 40_000);
    });
  });
}
