import { describe, expect, it } from 'vitest';
import { compareIdempotencyKeys, idempotencyKeyOf } from '../../src/domain/idempotency.js';

/** What the stores keep for an Idempotency-Key (src/domain/idempotency.ts), beyond the rules in safety-core.test.ts. */
describe('idempotency keys', () => {
  it('are of one bounded size whatever the caller sends: a 22-character scope and a 16-character fingerprint', () => {
    const grant = { ttlMs: 5_000, holder: 'h'.repeat(1_000), lockDelayMs: 0 };
    for (const [caller, key] of [
      ['c', 'k'],
      ['caller-with-a-long-id', 'x'.repeat(255)],
    ]) {
      expect(idempotencyKeyOf(caller as string, key as string, grant)).toMatch(/^[A-Za-z0-9_-]{22}:[A-Za-z0-9_-]{16}$/);
    }
  });

  it('a lease granted without a key (stored as null or absent) is never a replay or a reuse', () => {
    const asked = idempotencyKeyOf('c', 'k', { ttlMs: 5_000, holder: null, lockDelayMs: 0 });
    expect(compareIdempotencyKeys(null, asked)).toBe('other');
    expect(compareIdempotencyKeys(undefined, asked)).toBe('other');
  });
});
