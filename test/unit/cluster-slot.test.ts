import calculateSlot from 'cluster-key-slot';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { slotOf } from '../../src/store/redis/slot.js';

/** Characters that exercise every branch: ASCII, braces, 2- and 3-byte UTF-8, surrogate pairs and lone surrogates. */
const PIECES = [
  'a',
  'Z',
  '0',
  '/',
  ':',
  '#',
  '{',
  '}',
  '{}',
  'é',
  'ß',
  '\u07ff',
  '\u0800',
  '€',
  '\uffff',
  '😀',
  '\ud83d',
  '\ude00',
  'key-',
  'ns#3',
];

describe('Redis Cluster hash slot', () => {
  it('is the slot cluster-key-slot (ioredis) gives, on known keys', () => {
    for (const key of [
      '',
      '123456789',
      'foo',
      '{user1000}.following',
      'foo{}{bar}',
      'foo{{bar}}zap',
      'foo{bar}{zap}',
      '{}',
      'a{',
      '}a{b',
    ]) {
      expect(slotOf(key)).toBe(calculateSlot(key));
    }
    // Redis's own example: CRC16 of "123456789" is 0x31C3.
    expect(slotOf('123456789')).toBe(0x31c3 & 0x3fff);
  });

  it('is the slot cluster-key-slot gives, on generated keys of every kind of character', () => {
    const key = fc.array(fc.constantFrom(...PIECES), { maxLength: 24 }).map((parts) => parts.join(''));
    fc.assert(
      fc.property(fc.oneof(key, fc.string({ unit: 'binary', maxLength: 40 })), (k) => slotOf(k) === calculateSlot(k)),
      { numRuns: 20_000 },
    );
  });
});
