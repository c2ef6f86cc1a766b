import { describe, expect, it, vi } from 'vitest';
import {
  decodeRecord,
  encodeRecord,
  historyName,
  HistoryRecorder,
  leaseIdOf,
  timeline,
  type HistoryAppend,
  type HistoryKey,
  type HistoryRecord,
  type HistoryStore,
} from '../../src/domain/history.js';

/**
 * Lease history through its public functions: every field survives the stored form (compact and JSON),
 * the timeline derives expiries, lock-delays and hand-overs from the records and keeps what overlaps the
 * window asked for, and the recorder batches, caps and reports what it could not keep.
 */
const at = 1_796_225_617_711;
const KEY: HistoryKey = { namespace: 'billing', primitive: 'lock', key: 'invoices:42' };

describe('history records: every field survives the stored form', () => {
  const full: HistoryRecord = {
    kind: 'granted',
    at,
    lease: 'AbCdEfGhIjKlMnOp',
    fencingToken: 35,
    holder: 'worker|7 %done\nnext',
    expiresAt: at + 30_000,
    waitedMs: 1_234,
    lockDelayMs: 500,
    mode: 'read',
    set: true,
  };

  it('a record with every field, and text holding the separator, the escape and a line break', () => {
    const text = encodeRecord(full);
    expect(text).not.toContain('\n');
    expect(text.split('|')).toHaveLength(9);
    expect(decodeRecord(text)).toStrictEqual(full);
    const write = { ...full, mode: 'write' as const, holder: null };
    expect(decodeRecord(encodeRecord(write))).toStrictEqual(write);
  });

  it('each kind, and the fields of force releases and release requests', () => {
    const records: HistoryRecord[] = [
      { kind: 'renewed', at, fencingToken: 0, expiresAt: at },
      { kind: 'released', at, lease: 'x' },
      { kind: 'force_released', at, fencingToken: 9, by: 'ops|key%1' },
      { kind: 'release_requested', at, fencingToken: 9, by: 'ops', reason: 'stuck |100%' },
      { kind: 'release_requested', at, fencingToken: 9, by: 'ops', reason: null },
      { kind: 'granted', at: 0, fencingToken: 1, holder: '', waitedMs: 0, lockDelayMs: 0 },
    ];
    for (const r of records) expect(decodeRecord(encodeRecord(r)), JSON.stringify(r)).toStrictEqual(r);
    // Distinct kinds are stored under distinct letters.
    expect(new Set(records.slice(0, 4).map((r) => encodeRecord(r).charAt(0))).size).toBe(4);
  });

  it('integers are stored in base 36, the expiry as the lease time left', () => {
    expect(encodeRecord({ kind: 'granted', at: 36 * 36 + 35, fencingToken: 36, expiresAt: 36 * 36 + 35 + 10 })).toBe('g10z|f10|ea');
    expect(encodeRecord({ kind: 'released', at: 0 })).toBe('r0');
  });

  it('a negative integer (a clock before the epoch, or an expiry before its event) still round-trips', () => {
    const r: HistoryRecord = { kind: 'renewed', at: 5, expiresAt: -100, fencingToken: 1 };
    expect(decodeRecord(encodeRecord(r))).toStrictEqual(r);
  });

  it('a record the compact form cannot hold is kept in JSON, and read back the same', () => {
    const unsafe: HistoryRecord[] = [
      { kind: 'granted', at: 1.5 },
      { kind: 'granted', at, fencingToken: 2 ** 60 },
      { kind: 'granted', at, expiresAt: 0.5 },
      { kind: 'granted', at: Number.MAX_SAFE_INTEGER, expiresAt: -Number.MAX_SAFE_INTEGER },
      { kind: 'granted', at, waitedMs: 0.25 },
      { kind: 'granted', at, lockDelayMs: 0.25 },
      { kind: 'released', at, lease: 'a|b' },
    ];
    for (const r of unsafe) {
      const text = encodeRecord(r);
      expect(text.startsWith('{'), JSON.stringify(r)).toBe(true);
      expect(decodeRecord(text)).toStrictEqual(r);
    }
    const all: HistoryRecord = { ...full, at: 0.5, expiresAt: 9, holder: null, by: 'ops', reason: 'why' };
    expect(decodeRecord(encodeRecord(all))).toStrictEqual(all);
    const kept: HistoryRecord = { kind: 'release_requested', at: 0.5, holder: 'h', reason: null, mode: 'write' };
    expect(decodeRecord(encodeRecord(kept))).toStrictEqual(kept);
  });

  it('JSON fields of the wrong type are left out; an unknown mode or a bad number field is skipped', () => {
    expect(decodeRecord(`{"k":"g","t":5,"l":1,"f":"1","h":2,"e":"3","w":null,"d":"4","m":"x","b":3,"y":4,"s":true}`)).toStrictEqual({
      kind: 'granted',
      at: 5,
    });
    expect(decodeRecord('{"k":1,"t":5}')).toBeNull();
    expect(decodeRecord('{"k":["g"],"t":5}')).toBeNull();
    expect(decodeRecord('{"k":"g","t":"5"}')).toBeNull();
    expect(decodeRecord('g5|f!|e!|w!|d!|mx|f123456789012')).toStrictEqual({ kind: 'granted', at: 5 });
    expect(decodeRecord('g-5')).toStrictEqual({ kind: 'granted', at: -5 });
    expect(decodeRecord('g5!')).toBeNull();
    expect(decodeRecord('g123456789012')).toBeNull();
    // Eleven base-36 digits can exceed a safe integer: refused.
    expect(decodeRecord('gzzzzzzzzzzz'.slice(0, 12))).toBeNull();
  });

  it('a lease id is a one-way digest of its owner token, the same for a grant and its release', () => {
    const id = leaseIdOf('owner-token-1');
    expect(id).toMatch(/^[A-Za-z0-9_-]{16}$/);
    expect(leaseIdOf('owner-token-1')).toBe(id);
    expect(leaseIdOf('owner-token-2')).not.toBe(id);
    expect(id).not.toContain('owner');
  });

  it('a key is filed under its primitive, namespace and key', () => {
    expect(historyName(KEY)).toBe('lock:billing/invoices:42');
    expect(historyName({ ...KEY, primitive: 'rwlock' })).not.toBe(historyName(KEY));
  });
});

describe('history timeline', () => {
  const grant = (t: number, token: number, extra: Partial<HistoryRecord> = {}): HistoryRecord => ({
    kind: 'granted',
    at: t,
    lease: `L${token}`,
    fencingToken: token,
    holder: `h${token}`,
    expiresAt: t + 1_000,
    ...extra,
  });
  const release = (t: number, token: number): HistoryRecord => ({ kind: 'released', at: t, lease: `L${token}` });

  it('a released lease: granted then released, with how long it was held; records sorted by time', () => {
    const out = timeline([release(1_400, 1), grant(1_000, 1, { mode: 'write' })], 10_000);
    expect(out).toStrictEqual([
      { type: 'granted', at: 1_000, fencingToken: 1, holder: 'h1', mode: 'write', expiresAt: 2_000 },
      { type: 'released', at: 1_400, fencingToken: 1, holder: 'h1', mode: 'write', heldMs: 400 },
    ]);
  });

  it('a lease with no end recorded expires at its last expiry, then its lock-delay runs', () => {
    const records = [grant(1_000, 1, { lockDelayMs: 300 }), { kind: 'renewed', at: 1_500, lease: 'L1', expiresAt: 2_500 } as HistoryRecord];
    expect(timeline(records, 10_000)).toStrictEqual([
      { type: 'granted', at: 1_000, fencingToken: 1, holder: 'h1', expiresAt: 2_000 },
      { type: 'renewed', at: 1_500, fencingToken: 1, holder: 'h1', expiresAt: 2_500 },
      { type: 'expired', at: 2_500, fencingToken: 1, holder: 'h1', heldMs: 1_500 },
      { type: 'lock_delay', at: 2_500, fencingToken: 1, holder: 'h1', until: 2_800 },
    ]);
    // Not before its expiry has passed, and not when it was released.
    expect(timeline(records, 2_499).map((e) => e.type)).toStrictEqual(['granted', 'renewed']);
    expect(timeline(records, 2_500).map((e) => e.type)).toContain('expired');
    expect(timeline([grant(1_000, 1, { lockDelayMs: 300 }), release(1_200, 1)], 10_000).map((e) => e.type)).toStrictEqual([
      'granted',
      'released',
    ]);
    // No lock-delay asked: only the expiry.
    expect(timeline([grant(1_000, 2, { mode: 'read' })], 10_000).at(-1)).toStrictEqual({
      type: 'expired',
      at: 2_000,
      fencingToken: 2,
      holder: 'h2',
      mode: 'read',
      heldMs: 1_000,
    });
  });

  it('a renewal without an expiry keeps the one before', () => {
    const out = timeline([grant(1_000, 1), { kind: 'renewed', at: 1_100, fencingToken: 1 }], 10_000);
    expect(out.map((e) => [e.type, e.at])).toStrictEqual([
      ['granted', 1_000],
      ['renewed', 1_100],
      ['expired', 2_000],
    ]);
    expect(out[1]).not.toHaveProperty('expiresAt');
  });

  it('a waiting caller granted as another lease ended was handed the key; one that found it free long after was not', () => {
    const handed = timeline([grant(1_000, 1), release(1_300, 1), grant(1_305, 2, { waitedMs: 200 })], 1_400);
    expect(handed.map((e) => e.type)).toStrictEqual(['granted', 'released', 'handed_over']);
    expect(handed[2]).toMatchObject({ fencingToken: 2, holder: 'h2', waitedMs: 200 });
    // The end is inside the wait, within the slack on either side.
    expect(timeline([grant(1_000, 1), release(1_300, 1), grant(1_520, 2, { waitedMs: 200 })], 1_600).at(-1)?.type).toBe('handed_over');
    expect(timeline([grant(1_000, 1), release(1_300, 1), grant(1_521, 2, { waitedMs: 200 })], 1_600).at(-1)?.type).toBe('granted');
    expect(timeline([grant(1_000, 1), release(1_320, 1), grant(1_300, 2, { waitedMs: 200 })], 1_600)[1]?.type).toBe('handed_over');
    expect(timeline([grant(1_000, 1), release(1_321, 1), grant(1_300, 2, { waitedMs: 200 })], 1_600)[1]?.type).toBe('granted');
    // Did not wait, or waited 0: a plain grant.
    expect(timeline([grant(1_000, 1), release(1_300, 1), grant(1_305, 2)], 1_400).at(-1)?.type).toBe('granted');
    expect(timeline([grant(1_000, 1), release(1_300, 1), grant(1_305, 2, { waitedMs: 0 })], 1_400).at(-1)?.type).toBe('granted');
    // An expiry ends a lease too; the lease's own end never counts.
    expect(timeline([grant(1_000, 1), grant(2_010, 2, { waitedMs: 500 })], 2_100)[2]?.type).toBe('handed_over');
    expect(timeline([grant(1_000, 2, { waitedMs: 500 }), release(1_005, 2)], 2_100)[0]?.type).toBe('granted');
  });

  it("a lock set's release long after its lease expired on the key changed nothing and is left out; one within the clock skew is kept", () => {
    const setRelease = (t: number, token: number): HistoryRecord => ({ ...release(t, token), set: true });
    expect(timeline([grant(1_000, 1, { set: true }), setRelease(3_001, 1)], 10_000).map((e) => e.type)).toStrictEqual([
      'granted',
      'expired',
    ]);
    expect(timeline([grant(1_000, 1, { set: true }), setRelease(3_000, 1)], 10_000).map((e) => [e.type, e.at])).toStrictEqual([
      ['granted', 1_000],
      ['released', 3_000],
    ]);
  });

  it("a lease's own release after its recorded end ended it there: the store took it, so a renewal went unrecorded", () => {
    expect(timeline([grant(1_000, 1), release(3_001, 1)], 10_000).map((e) => [e.type, e.at, e.heldMs])).toStrictEqual([
      ['granted', 1_000, undefined],
      ['released', 3_001, 2_001],
    ]);
  });

  it('a release without a lease id names no lease, so it starts none; force releases and requests name who did it', () => {
    const out = timeline(
      [
        grant(1_000, 1, { lease: undefined }),
        { kind: 'release_requested', at: 1_100, fencingToken: 1, by: 'ops', reason: 'stuck' },
        { kind: 'release_requested', at: 1_150, fencingToken: 1 },
        { kind: 'force_released', at: 1_200, fencingToken: 1, by: 'ops' },
        { kind: 'released', at: 1_300 },
      ],
      10_000,
    );
    expect(out).toStrictEqual([
      { type: 'granted', at: 1_000, fencingToken: 1, holder: 'h1', expiresAt: 2_000 },
      { type: 'release_requested', at: 1_100, fencingToken: 1, holder: 'h1', by: 'ops', reason: 'stuck' },
      { type: 'release_requested', at: 1_150, fencingToken: 1, holder: 'h1', reason: null },
      { type: 'force_released', at: 1_200, fencingToken: 1, holder: 'h1', heldMs: 200, by: 'ops' },
      { type: 'released', at: 1_300, fencingToken: null, holder: null },
    ]);
  });

  it('a lease whose grant was not kept: its end names its token and holder, with no time held', () => {
    const out = timeline(
      [
        { kind: 'renewed', at: 500, fencingToken: 4, holder: 'h4', mode: 'read', expiresAt: 900 },
        { kind: 'force_released', at: 600, fencingToken: 4 },
      ],
      10_000,
    );
    expect(out).toStrictEqual([
      { type: 'renewed', at: 500, fencingToken: 4, holder: 'h4', mode: 'read', expiresAt: 900 },
      { type: 'force_released', at: 600, fencingToken: 4, holder: 'h4', mode: 'read' },
    ]);
    // Expired without a grant kept: no time held either; a grant of a lock set's key says so.
    expect(timeline([{ kind: 'renewed', at: 500, fencingToken: 4, expiresAt: 900 }], 10_000).at(-1)).toStrictEqual({
      type: 'expired',
      at: 900,
      fencingToken: 4,
      holder: null,
    });
    expect(timeline([grant(1_000, 1, { set: true })], 1_500)[0]).toMatchObject({ type: 'granted', lockSet: true });
    // A grant whose expiry is before its own time (clocks apart) expires having been held 0 ms, never less.
    expect(timeline([grant(1_000, 1, { expiresAt: 900 })], 1_500).find((e) => e.type === 'expired')).toMatchObject({ heldMs: 0 });
  });

  it('only the leases that ended count for a hand-over: any one of them in the wait, never a lease still held', () => {
    // Another lease ended long before the wait, and one inside it: handed over.
    const records = [grant(100, 3), release(500, 3), grant(1_000, 1), release(1_300, 1), grant(1_305, 2, { waitedMs: 200 })];
    expect(timeline(records, 1_400).at(-1)?.type).toBe('handed_over');
    // A semaphore: another lease is still held when the waiter gets its permit; nothing ended.
    const held = timeline([grant(0, 1, { expiresAt: 10_000 }), grant(10, 2, { waitedMs: 40 })], 50);
    expect(held.map((e) => e.type)).toStrictEqual(['granted', 'granted']);
    // A release naming no lease ends nothing; one whose grant is past the retention still ends its lease.
    expect(timeline([{ kind: 'released', at: 1_300 }, grant(1_305, 2, { waitedMs: 200 })], 1_400).at(-1)?.type).toBe('granted');
    expect(timeline([release(1_300, 1), grant(1_305, 2, { waitedMs: 200 })], 1_400).at(-1)?.type).toBe('handed_over');
  });

  it('only a release is dropped for coming long after its lease expired; a force release then is kept', () => {
    const out = timeline([grant(1_000, 1), { kind: 'force_released', at: 3_001, fencingToken: 1, by: 'ops' }], 10_000);
    expect(out.map((e) => e.type)).toStrictEqual(['granted', 'force_released']);
  });

  it('a window keeps its own records and every record of a lease that overlaps it', () => {
    const records = [grant(1_000, 1), release(1_500, 1), grant(3_000, 2), release(3_200, 2), grant(5_000, 3), release(5_100, 3)];
    const types = (since: number, until: number) => timeline(records, 10_000, since, until).map((e) => `${e.type}:${e.fencingToken}`);
    // The lease held at `since` is shown from its grant to its end.
    expect(types(1_200, 3_100)).toStrictEqual(['granted:1', 'released:1', 'granted:2', 'released:2']);
    expect(types(1_500, 1_500)).toStrictEqual(['granted:1', 'released:1']);
    expect(types(1_501, 2_999)).toStrictEqual([]);
    expect(types(2_000, 3_000)).toStrictEqual(['granted:2', 'released:2']);
    expect(types(5_100, Infinity)).toStrictEqual(['granted:3', 'released:3']);
    // A lease not ended yet overlaps every window after its grant; one whose grant was not kept only by its records.
    expect(timeline([grant(1_000, 1, { expiresAt: 99_000 })], 10_000, 5_000, 6_000).map((e) => e.type)).toStrictEqual(['granted']);
    expect(timeline([grant(1_000, 1, { expiresAt: undefined })], 10_000, 5_000, 6_000).map((e) => e.type)).toStrictEqual(['granted']);
    // A grant without an end shows none (the field is absent, not undefined).
    expect(timeline([grant(1_000, 1, { expiresAt: undefined })], 10_000)).toStrictEqual([
      { type: 'granted', at: 1_000, fencingToken: 1, holder: 'h1' },
    ]);
    expect(timeline([{ kind: 'renewed', at: 500, fencingToken: 4, expiresAt: 9_000 }], 1_000, 600, 700)).toStrictEqual([]);
    // A record exactly at either edge of the window is in it, with or without its grant.
    const renewal: HistoryRecord = { kind: 'renewed', at: 600, fencingToken: 4, expiresAt: 9_000 };
    expect(timeline([renewal], 1_000, 600, 700)).toHaveLength(1);
    expect(timeline([renewal], 1_000, 500, 600)).toHaveLength(1);
    // A release that names no lease, outside the window: left out.
    expect(timeline([{ kind: 'released', at: 1_300 }], 2_000, 0, 100)).toStrictEqual([]);
  });
});

describe('history recorder', () => {
  class FakeStore implements HistoryStore {
    batches: HistoryAppend[][] = [];
    fail = false;
    closed = false;
    pending: (() => void)[] = [];
    hold = false;
    append(batch: readonly HistoryAppend[]): Promise<void> {
      this.batches.push([...batch]);
      if (this.fail) return Promise.reject(new Error('down'));
      if (this.hold) return new Promise((resolve) => this.pending.push(resolve));
      return Promise.resolve();
    }
    read(key: HistoryKey): Promise<HistoryRecord[]> {
      return Promise.resolve(
        this.batches
          .flat()
          .filter((e) => historyName(e) === historyName(key))
          .map((e) => e.record),
      );
    }
    close(): Promise<void> {
      this.closed = true;
      return Promise.resolve();
    }
  }
  const event = (n: number): HistoryRecord => ({ kind: 'released', at: n });

  it('writes what gathered as one batch after flushMs; a reader reads its own writes at once', async () => {
    const store = new FakeStore();
    const recorder = new HistoryRecorder(store, { flushMs: 20, maxBuffered: 100 });
    recorder.record(KEY, event(1));
    recorder.add({ ...KEY, record: event(2) });
    expect(store.batches).toStrictEqual([]);
    await expect.poll(() => store.batches.length, { timeout: 5_000 }).toBe(1);
    expect(store.batches[0]).toStrictEqual([
      { ...KEY, record: event(1) },
      { ...KEY, record: event(2) },
    ]);
    recorder.record(KEY, event(3));
    expect(await recorder.read(KEY)).toStrictEqual([event(1), event(2), event(3)]);
    expect(store.batches).toHaveLength(2);
    // Nothing buffered: a flush writes nothing.
    await recorder.flush();
    expect(store.batches).toHaveLength(2);
    await recorder.close();
  });

  it('past maxBuffered the oldest are dropped and counted', async () => {
    const lost: [number, string][] = [];
    const store = new FakeStore();
    const recorder = new HistoryRecorder(store, { flushMs: 60_000, maxBuffered: 3, observer: { lost: (n, why) => lost.push([n, why]) } });
    for (let i = 1; i <= 3; i++) recorder.record(KEY, event(i));
    expect(lost).toStrictEqual([]);
    recorder.record(KEY, event(4));
    recorder.record(KEY, event(5));
    expect(lost).toStrictEqual([
      [1, 'buffer'],
      [1, 'buffer'],
    ]);
    await recorder.flush();
    expect(store.batches[0]?.map((e) => e.record.at)).toStrictEqual([3, 4, 5]);
    await recorder.close();
  });

  it('a batch the store refuses is dropped and counted, never retried', async () => {
    const lost: [number, string][] = [];
    const store = new FakeStore();
    store.fail = true;
    const recorder = new HistoryRecorder(store, { flushMs: 60_000, maxBuffered: 10, observer: { lost: (n, why) => lost.push([n, why]) } });
    recorder.record(KEY, event(1));
    recorder.record(KEY, event(2));
    await recorder.flush();
    expect(lost).toStrictEqual([[2, 'store']]);
    store.fail = false;
    await recorder.flush();
    expect(store.batches).toHaveLength(1);
    // An observer without a lost() hook: dropped quietly as well (from a full buffer and by the store).
    store.fail = true;
    const hookless = new HistoryRecorder(store, { flushMs: 60_000, maxBuffered: 1, observer: {} });
    hookless.record(KEY, event(1));
    hookless.record(KEY, event(2));
    await expect(hookless.flush()).resolves.toBeUndefined();
    // Without an observer a refused batch is dropped quietly.
    const quiet = new HistoryRecorder(store, { flushMs: 60_000, maxBuffered: 1 });
    store.fail = true;
    quiet.record(KEY, event(1));
    quiet.record(KEY, event(2));
    await expect(quiet.flush()).resolves.toBeUndefined();
  });

  it('a grant with its release folded in is lost as the two events it holds: from a refused batch and from a full buffer', async () => {
    const lost: [number, string][] = [];
    const store = new FakeStore();
    store.fail = true;
    const recorder = new HistoryRecorder(store, { flushMs: 60_000, maxBuffered: 2, observer: { lost: (n, why) => lost.push([n, why]) } });
    const grant = (n: number): HistoryAppend => ({ ...KEY, record: { kind: 'granted', at: n, fencingToken: n, expiresAt: n + 1_000 } });
    // A short pair, then an event alone: one record of two events, and one of one.
    recorder.addLeaseEvent(grant(1), 'token-1');
    recorder.addRelease(KEY, 'token-1', 2);
    recorder.record(KEY, event(3));
    await recorder.flush();
    expect(store.batches[0]).toHaveLength(2);
    expect(lost).toStrictEqual([[3, 'store']]);
    // A full buffer drops its oldest record: a short pair is two events gone.
    lost.length = 0;
    recorder.addLeaseEvent(grant(4), 'token-4');
    recorder.addRelease(KEY, 'token-4', 5);
    recorder.record(KEY, event(6));
    recorder.record(KEY, event(7));
    expect(lost).toStrictEqual([[2, 'buffer']]);
    await recorder.close();
  });

  it('one batch in flight at a time: events that come meanwhile go in the next, after it', async () => {
    const store = new FakeStore();
    store.hold = true;
    const recorder = new HistoryRecorder(store, { flushMs: 60_000, maxBuffered: 10 });
    recorder.record(KEY, event(1));
    const first = recorder.flush();
    await expect.poll(() => store.batches.length).toBe(1);
    recorder.record(KEY, event(2));
    let secondDone = false;
    const second = recorder.flush().then(() => (secondDone = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(store.batches).toHaveLength(1);
    expect(secondDone).toBe(false);
    store.pending.shift()?.();
    await first;
    await expect.poll(() => store.batches.length).toBe(2);
    expect(store.batches[1]?.map((e) => e.record.at)).toStrictEqual([2]);
    store.pending.shift()?.();
    await second;
    expect(secondDone).toBe(true);
  });

  it('close writes what is left, closes the store, and records nothing after', async () => {
    const store = new FakeStore();
    const recorder = new HistoryRecorder(store, { flushMs: 60_000, maxBuffered: 10 });
    recorder.record(KEY, event(1));
    await recorder.close();
    expect(store.batches).toStrictEqual([[{ ...KEY, record: event(1) }]]);
    expect(store.closed).toBe(true);
    recorder.record(KEY, event(2));
    await recorder.flush();
    expect(store.batches).toHaveLength(1);
  });

  it('a timer flush leaves a young open grant for the next batch, once: its release then folds into it', async () => {
    vi.useFakeTimers();
    try {
      const store = new FakeStore();
      const recorder = new HistoryRecorder(store, { flushMs: 40, maxBuffered: 10 });
      const grant = (at: number): HistoryRecord => ({ kind: 'granted', at, fencingToken: at, expiresAt: at + 1_000 });
      const other: HistoryKey = { ...KEY, key: 'other' };
      const third: HistoryKey = { ...KEY, key: 'third' };
      // Recorded long before the flush (by its store time): written by the first flush, as is any
      // other event; the grant of the last half flushMs waits.
      recorder.addLeaseEvent({ ...other, record: grant(Date.now() - 1_000) }, 'token-old');
      recorder.record(third, event(Date.now()));
      // Recorded in the first half of the timer's flushMs: written by its flush as well.
      recorder.addLeaseEvent({ ...third, record: grant(Date.now()) }, 'token-first-half');
      await vi.advanceTimersByTimeAsync(25);
      recorder.addLeaseEvent({ ...KEY, record: grant(Date.now()) }, 'token-a');
      await vi.advanceTimersByTimeAsync(15);
      expect(store.batches.map((b) => b.map((e) => e.key))).toStrictEqual([['other', 'third', 'third']]);
      // Its release, 10 ms after the flush: folded into the grant the next flush writes.
      await vi.advanceTimersByTimeAsync(10);
      recorder.addRelease(KEY, 'token-a', Date.now());
      await vi.advanceTimersByTimeAsync(30);
      expect(store.batches).toHaveLength(2);
      expect(store.batches[1]?.map((e) => [e.record.kind, e.record.releasedAt !== undefined, e.record.lease])).toStrictEqual([
        ['granted', true, leaseIdOf('token-a')],
      ]);
      // A grant whose release does not come is left once only: the next timer's flush writes it.
      recorder.record(third, event(Date.now()));
      await vi.advanceTimersByTimeAsync(25);
      recorder.addLeaseEvent({ ...KEY, record: grant(Date.now()) }, 'token-b');
      await vi.advanceTimersByTimeAsync(15);
      expect(store.batches.map((b) => b.length)).toStrictEqual([3, 1, 1]);
      await vi.advanceTimersByTimeAsync(39);
      expect(store.batches).toHaveLength(3);
      await vi.advanceTimersByTimeAsync(1);
      expect(store.batches[3]?.map((e) => [e.record.kind, e.record.releasedAt])).toStrictEqual([['granted', undefined]]);
      // A read writes a young grant at once.
      recorder.addLeaseEvent({ ...KEY, record: grant(Date.now()) }, 'token-c');
      expect((await recorder.read(KEY)).at(-1)?.lease).toBe(leaseIdOf('token-c'));
      await recorder.close();
    } finally {
      vi.useRealTimers();
    }
  });

  it('a grant left for the next batch keeps its key in order, and is left once even with a clock far ahead', async () => {
    vi.useFakeTimers();
    try {
      const store = new FakeStore();
      const recorder = new HistoryRecorder(store, { flushMs: 40, maxBuffered: 10 });
      const grant = (at: number): HistoryRecord => ({ kind: 'granted', at, fencingToken: 1, expiresAt: at + 1_000 });
      recorder.record({ ...KEY, key: 'filler' }, event(Date.now()));
      await vi.advanceTimersByTimeAsync(25);
      // A young grant with an event of its key after it: written with it, in order.
      recorder.addLeaseEvent({ ...KEY, record: grant(Date.now()) }, 'token-a');
      recorder.record(KEY, { kind: 'renewed', at: Date.now(), fencingToken: 1, expiresAt: Date.now() + 2_000 });
      // A grant stamped by a store clock 10 s ahead: young by its time at every flush, left once only.
      const ahead: HistoryKey = { ...KEY, key: 'ahead' };
      recorder.addLeaseEvent({ ...ahead, record: grant(Date.now() + 10_000) }, 'token-b');
      await vi.advanceTimersByTimeAsync(15);
      expect(store.batches[0]?.map((e) => `${e.key}:${e.record.kind}`)).toStrictEqual([
        'filler:released',
        'invoices:42:granted',
        'invoices:42:renewed',
      ]);
      await vi.advanceTimersByTimeAsync(40);
      expect(store.batches[1]?.map((e) => `${e.key}:${e.record.kind}`)).toStrictEqual(['ahead:granted']);
      await recorder.close();
    } finally {
      vi.useRealTimers();
    }
  });

  it('a flush by hand cancels the timer: the events are not written twice; a new event arms it again', async () => {
    vi.useFakeTimers();
    try {
      const store = new FakeStore();
      const recorder = new HistoryRecorder(store, { flushMs: 30, maxBuffered: 10 });
      recorder.record(KEY, event(1));
      await recorder.flush();
      // An event 10 ms later waits its own flushMs, not what was left of the first event's timer.
      await vi.advanceTimersByTimeAsync(10);
      recorder.record(KEY, event(2));
      await vi.advanceTimersByTimeAsync(25);
      expect(store.batches).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(5);
      expect(store.batches).toHaveLength(2);
      await vi.advanceTimersByTimeAsync(100);
      expect(store.batches).toHaveLength(2);
      recorder.record(KEY, event(3));
      await vi.advanceTimersByTimeAsync(29);
      expect(store.batches).toHaveLength(2);
      await vi.advanceTimersByTimeAsync(1);
      expect(store.batches).toHaveLength(3);
      await recorder.close();
    } finally {
      vi.useRealTimers();
    }
  });
});
