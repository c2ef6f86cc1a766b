import { describe, expect, it } from 'vitest';
import { CONTENDED_KEEP_MS, ContendedKeys } from '../../src/store/redis/contended-keys.js';

describe('ContendedKeys: the keys whose release may hand the lock over', () => {
  it('a key is contended from the held answer until CONTENDED_KEEP_MS past the lease end it was told of', () => {
    const keys = new ContendedKeys();
    expect(keys.has('a', 0)).toBe(false);
    keys.mark('a', 500, 0);
    expect(keys.has('a', 1)).toBe(true);
    expect(keys.has('a', 500 + CONTENDED_KEEP_MS - 1)).toBe(true);
    expect(keys.has('b', 1)).toBe(false);
    // Ended: no longer contended, and the mark is gone.
    expect(keys.has('a', 500 + CONTENDED_KEEP_MS)).toBe(false);
    expect(keys.size).toBe(0);
  });

  it('a later held answer moves the end later', () => {
    const keys = new ContendedKeys();
    keys.mark('a', 0, 0);
    keys.mark('a', 3_000, 900);
    expect(keys.has('a', 900 + 3_000 + CONTENDED_KEEP_MS - 1)).toBe(true);
  });

  it('holds at most 4,096 keys: ended marks are dropped first, and all of them when none has ended', () => {
    const keys = new ContendedKeys();
    for (let i = 0; i < 4096; i++) keys.mark(`k${i}`, i < 100 ? 0 : 60_000, 0);
    // 100 of them have ended by then: only those are dropped for the new one.
    keys.mark('new', 0, 2 * CONTENDED_KEEP_MS);
    expect(keys.size).toBe(3997);
    expect(keys.has('k100', 2 * CONTENDED_KEEP_MS)).toBe(true);
    for (let i = 0; i < 99; i++) keys.mark(`more${i}`, 60_000, 2 * CONTENDED_KEEP_MS);
    expect(keys.size).toBe(4096);
    // Full, and none has ended: start over rather than grow.
    keys.mark('last', 0, 2 * CONTENDED_KEEP_MS);
    expect(keys.size).toBe(1);
    expect(keys.has('last', 2 * CONTENDED_KEEP_MS)).toBe(true);
  });
});
