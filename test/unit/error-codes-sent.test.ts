import { describe, expect, it } from 'vitest';
import { sentCodeOf } from '../../src/domain/error-codes.js';

/** The code an error is answered with (the whole table is checked in test/ops/error-codes.test.ts). */
describe('sentCodeOf', () => {
  it('answers a code that is sent as itself, and an internal one as the code it is sent as', () => {
    expect(sentCodeOf('lock_held')).toBe('lock_held');
    expect(sentCodeOf('holder_changed')).toBe('holder_changed');
    // A caller that left while waiting is answered (if anyone still reads it) as a wait that ran out.
    expect(sentCodeOf('wait_aborted')).toBe('lock_held');
  });
});
