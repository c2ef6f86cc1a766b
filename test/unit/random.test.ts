import { describe, expect, it } from 'vitest';
import { randomBase64url } from '../../src/domain/random.js';

describe('randomBase64url', () => {
  it('returns the requested number of bytes, base64url-encoded, never the same twice across pool refills', () => {
    const seen = new Set<string>();
    // 1,000 tokens of 16 bytes span several 4 KiB pool refills.
    for (let i = 0; i < 1000; i++) {
      const token = randomBase64url(16);
      expect(token).toMatch(/^[A-Za-z0-9_-]{22}$/);
      seen.add(token);
    }
    expect(seen.size).toBe(1000);
    expect(Buffer.from(randomBase64url(9), 'base64url')).toHaveLength(9);
    expect(Buffer.from(randomBase64url(5000), 'base64url')).toHaveLength(5000);
  });
});
