import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { iso } from '../../src/http/routes/responses.js';

/** The answers' times: the same text as Date's own ISO form for every time, whichever second came before. */
describe('iso', () => {
  it('writes what toISOString writes, for times in any order', () => {
    const now = Date.now();
    const near = fc.integer({ min: now - 5_000, max: now + 5_000 });
    const any = fc.oneof(
      near,
      fc.integer({ min: 0, max: 253_402_300_799_999 }),
      fc.integer({ min: 253_402_300_799_000, max: 8.64e15 }),
      fc.double({ min: 0, max: 4e12, noNaN: true }),
      fc.integer({ min: -62_198_755_200_000, max: -1 }),
    );
    fc.assert(
      fc.property(fc.array(any, { minLength: 1, maxLength: 50 }), (times) => {
        for (const ms of times) expect(iso(ms)).toBe(new Date(ms).toISOString());
      }),
      { numRuns: 500, seed: 7 },
    );
  });

  it('writes each millisecond of one second, with its own padding', () => {
    const second = Date.UTC(2026, 11, 2, 21, 59, 59);
    for (const millis of [0, 1, 9, 10, 99, 100, 999]) expect(iso(second + millis)).toBe(new Date(second + millis).toISOString());
    expect(iso(second + 1000)).toBe('2026-12-02T22:00:00.000Z');
  });

  it('throws for a time Date cannot write, as toISOString does', () => {
    expect(() => iso(Number.NaN)).toThrow(RangeError);
    expect(() => iso(8.64e15 + 1)).toThrow(RangeError);
  });
});
