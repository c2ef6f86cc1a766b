import { afterEach, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { FakeClock } from '../helpers/fake-clock.js';

/**
 * How long the embedded store keeps a retired quota slot (QuotaSlotStore.retireQuotaSlot): until the
 * evicted lease's end, and not a millisecond past it. Within that time an extend (a renewal decided
 * before the eviction) must not count the slot again; after it, no such renewal can exist, and the id
 * is an unknown slot like any other: an extend counts it again. The namespace below holds a cap of
 * one, so whether the slot counts shows as whether another reservation fits.
 */
const NS = 'ns';

describe('embedded store: a retired quota slot', () => {
  const stores: MemoryStore[] = [];
  afterEach(async () => {
    for (const store of stores.splice(0)) await store.close();
  });
  const open = (clock: FakeClock) => {
    const store = new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0, clock: clock.now });
    stores.push(store);
    return store;
  };
  /** Whether the slot `id` counts: a cap of one leaves no room beside it. */
  const counts = async (store: MemoryStore, id: string) => {
    const probe = await store.reserveQuotaSlot(NS, `probe-${id}`, 1_000, 1);
    if (probe.reserved) await store.freeQuotaSlot(NS, `probe-${id}`);
    return !probe.reserved;
  };

  it('retired until the present instant or earlier is only freed: an extend counts the slot again', async () => {
    const clock = new FakeClock(1_000_000);
    const store = open(clock);
    for (const [id, untilMs] of [
      ['now', clock.nowMs],
      ['past', clock.nowMs - 1_000],
    ] as const) {
      expect(await store.reserveQuotaSlot(NS, id, 5_000, 1)).toEqual({ reserved: true });
      await store.retireQuotaSlot(NS, id, untilMs);
      expect(await counts(store, id)).toBe(false);
      await store.extendQuotaSlot(NS, id, clock.nowMs + 5_000);
      expect(await counts(store, id)).toBe(true);
      await store.freeQuotaSlot(NS, id);
    }
  });

  it('retired until a later instant: extends are ignored until then; once it has passed (and been swept), one counts the slot', async () => {
    const clock = new FakeClock(1_000_000);
    const store = open(clock);
    expect(await store.reserveQuotaSlot(NS, 'a', 5_000, 1)).toEqual({ reserved: true });
    await store.retireQuotaSlot(NS, 'a', clock.nowMs + 5_000);
    await store.extendQuotaSlot(NS, 'a', clock.nowMs + 5_000);
    expect(await counts(store, 'a')).toBe(false);
    clock.advance(5_000);
    store.sweep();
    await store.extendQuotaSlot(NS, 'a', clock.nowMs + 5_000);
    expect(await counts(store, 'a')).toBe(true);
  });

  it('retired twice: the later end holds, whichever report came last', async () => {
    const clock = new FakeClock(1_000_000);
    const store = open(clock);
    const start = clock.nowMs;
    expect(await store.reserveQuotaSlot(NS, 'a', 5_000, 1)).toEqual({ reserved: true });
    // Two reports of the eviction: a renewal may have moved the lease's end between them.
    await store.retireQuotaSlot(NS, 'a', start + 10_000);
    await store.retireQuotaSlot(NS, 'a', start + 5_000);
    clock.set(start + 6_000);
    store.sweep();
    // A renewal decided before the eviction may still carry an end up to start + 10 s: not counted.
    await store.extendQuotaSlot(NS, 'a', start + 10_000);
    expect(await counts(store, 'a')).toBe(false);
  });
});
