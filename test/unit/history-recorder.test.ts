import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  HistoryRecorder,
  leaseIdOf,
  type HistoryAppend,
  type HistoryKey,
  type HistoryRecord,
  type HistoryStore,
} from '../../src/domain/history.js';

/**
 * The recorder's timer flush at its edges (on fake timers: the flush is timed by them and the young
 * grants by Date.now): which grants it leaves for the next batch, what it writes when it leaves all of
 * them, when the next event is written; and what a release recorded as the recorder closes, or a lock
 * set's release, is written as.
 */
const KEY: HistoryKey = { namespace: 'billing', primitive: 'lock', key: 'invoices:42' };
const FLUSH_MS = 40;

class FakeStore implements HistoryStore {
  batches: HistoryAppend[][] = [];
  /** The next append waits until `release()`. */
  holdNext = false;
  private pending: (() => void) | null = null;
  append(batch: readonly HistoryAppend[]): Promise<void> {
    this.batches.push(batch.map((e) => ({ ...e, record: { ...e.record } })));
    if (!this.holdNext) return Promise.resolve();
    this.holdNext = false;
    return new Promise((resolve) => (this.pending = resolve));
  }
  release(): void {
    this.pending?.();
    this.pending = null;
  }
  read(): Promise<HistoryRecord[]> {
    return Promise.resolve([]);
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

const grant = (at: number, token: number): HistoryRecord => ({ kind: 'granted', at, fencingToken: token, expiresAt: at + 1_000 });
const filler = (): HistoryAppend => ({ ...KEY, key: 'filler', record: { kind: 'released', at: Date.now() } });
const keyed = (key: string): HistoryKey => ({ ...KEY, key });
const written = (store: FakeStore) => store.batches.map((b) => b.map((e) => `${e.key}:${e.record.kind}`));

describe('history recorder: the timer flush', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('leaves only an open grant held by an owner token: a renewal, a folded pair or a grant without a token is written', async () => {
    const store = new FakeStore();
    const recorder = new HistoryRecorder(store, { flushMs: FLUSH_MS, maxBuffered: 100 });
    recorder.add(filler());
    await vi.advanceTimersByTimeAsync(25);
    // All recorded in the last half of the flush's flushMs, each its key's last event.
    recorder.addLeaseEvent({ ...keyed('renewed'), record: { kind: 'renewed', at: Date.now(), fencingToken: 1 } }, 'token-1');
    recorder.addLeaseEvent({ ...keyed('pair'), record: grant(Date.now(), 2) }, 'token-2');
    recorder.addRelease(keyed('pair'), 'token-2', Date.now());
    recorder.add({ ...keyed('tokenless'), record: grant(Date.now(), 3) });
    recorder.addLeaseEvent({ ...keyed('open'), record: grant(Date.now(), 4) }, 'token-4');
    await vi.advanceTimersByTimeAsync(15);
    expect(written(store)).toStrictEqual([['filler:released', 'renewed:renewed', 'pair:granted', 'tokenless:granted']]);
    await recorder.close();
    expect(written(store)[1]).toStrictEqual(['open:granted']);
  });

  it('a grant dated exactly half a flushMs before the flush is young: left; one a millisecond older is written', async () => {
    const store = new FakeStore();
    const recorder = new HistoryRecorder(store, { flushMs: FLUSH_MS, maxBuffered: 100 });
    recorder.add(filler());
    await vi.advanceTimersByTimeAsync(FLUSH_MS / 2 - 1);
    recorder.addLeaseEvent({ ...keyed('older'), record: grant(Date.now(), 1) }, 'token-1');
    await vi.advanceTimersByTimeAsync(1);
    recorder.addLeaseEvent({ ...keyed('young'), record: grant(Date.now(), 2) }, 'token-2');
    await vi.advanceTimersByTimeAsync(FLUSH_MS / 2);
    expect(written(store)).toStrictEqual([['filler:released', 'older:granted']]);
    await recorder.close();
  });

  it('a flush that leaves every buffered event writes no batch at all', async () => {
    const store = new FakeStore();
    const recorder = new HistoryRecorder(store, { flushMs: FLUSH_MS, maxBuffered: 100 });
    // Dated by a store clock ahead of the instance's: young at the flush, so left for the next one.
    recorder.addLeaseEvent({ ...KEY, record: grant(Date.now() + 5_000, 1) }, 'token-1');
    await vi.advanceTimersByTimeAsync(FLUSH_MS);
    expect(store.batches).toStrictEqual([]);
    await vi.advanceTimersByTimeAsync(FLUSH_MS);
    expect(written(store)).toStrictEqual([['invoices:42:granted']]);
    await recorder.close();
  });

  it('after a timer flush that left nothing, the next event waits its own flushMs', async () => {
    const store = new FakeStore();
    const recorder = new HistoryRecorder(store, { flushMs: FLUSH_MS, maxBuffered: 100 });
    recorder.add(filler());
    await vi.advanceTimersByTimeAsync(FLUSH_MS);
    expect(store.batches).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(10);
    recorder.add(filler());
    await vi.advanceTimersByTimeAsync(FLUSH_MS - 10);
    expect(store.batches).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(10);
    expect(store.batches).toHaveLength(2);
    await recorder.close();
  });
});

describe('history recorder: releases', () => {
  it('a release that comes once close has begun is not recorded, not even folded into a grant still buffered', async () => {
    const store = new FakeStore();
    const recorder = new HistoryRecorder(store, { flushMs: 60_000, maxBuffered: 100 });
    recorder.add(filler());
    store.holdNext = true;
    const first = recorder.flush();
    // The first batch is in flight: the grant waits in the buffer for the next.
    recorder.addLeaseEvent({ ...KEY, record: grant(1, 1) }, 'token-1');
    const closing = recorder.close();
    recorder.addRelease(KEY, 'token-1', 2);
    store.release();
    await first;
    await closing;
    expect(store.batches[1]).toStrictEqual([{ ...KEY, record: { ...grant(1, 1), lease: leaseIdOf('token-1') } }]);
  });

  it("a lock set's release written as an event of its own says it is the set's", async () => {
    const store = new FakeStore();
    const recorder = new HistoryRecorder(store, { flushMs: 60_000, maxBuffered: 100 });
    recorder.addRelease(KEY, 'token-1', 5, true);
    recorder.addRelease(keyed('single'), 'token-2', 6);
    await recorder.flush();
    expect(store.batches).toStrictEqual([
      [
        { ...KEY, record: { kind: 'released', at: 5, set: true, lease: leaseIdOf('token-1') } },
        { ...keyed('single'), record: { kind: 'released', at: 6, lease: leaseIdOf('token-2') } },
      ],
    ]);
    await recorder.close();
  });
});
