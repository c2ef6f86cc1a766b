import fc from 'fast-check';
import { Command } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { commandText } from '../../src/store/redis/scripts.js';

/** What ioredis itself writes for a command of these arguments (its toWritable, string mode). */
const ioredisText = (name: string, args: string[]): string => new Command(name, args).toWritable(undefined as never) as string;

describe('commandText (the RESP of a script call, written as one flat string)', () => {
  it('is byte for byte what ioredis writes, for any string arguments: empty, long, and not ASCII', () => {
    const argument = fc.oneof(
      fc.string(),
      fc.string({ unit: 'grapheme', maxLength: 40 }),
      fc.string({ unit: 'binary', maxLength: 300 }),
      fc.integer().map(String),
      fc.constantFrom('', '-', 'é', '🙂', 'ключ/é', 'x'.repeat(255), 'x'.repeat(256)),
    );
    fc.assert(
      fc.property(fc.constantFrom('evalsha', 'eval'), fc.array(argument, { maxLength: 30 }), (name, args) => {
        const text = commandText(name, args);
        expect(text).toBe(ioredisText(name, args));
        expect(Buffer.byteLength(text)).toBe(Buffer.byteLength(ioredisText(name, args)));
      }),
      { numRuns: 2000 },
    );
  });
});
