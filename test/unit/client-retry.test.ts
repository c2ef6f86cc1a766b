import { describe, expect, it } from 'vitest';
import { errorFromResponse, KeyholderError, LockHeldError, UnavailableError } from '../../src/client/errors.js';
import { monotonicNow, retryDelayMs, withRetries } from '../../src/client/retry.js';

const backoff = { baseDelayMs: 100, maxDelayMs: 2_000 };
const unavailable = (retryAfterMs?: number) => new UnavailableError('down', 'store_unavailable', 503, undefined, retryAfterMs);

describe('client retry rules', () => {
  it('never retries sooner than Retry-After or the exponential step; jitter adds at most half a step', () => {
    for (let attempt = 1; attempt <= 8; attempt++) {
      const step = Math.min(2_000, 100 * 2 ** (attempt - 1));
      for (let i = 0; i < 200; i++) {
        const plain = retryDelayMs(undefined, attempt, backoff);
        expect(plain).toBeGreaterThanOrEqual(step);
        expect(plain).toBeLessThanOrEqual(step * 1.5);
        expect(retryDelayMs(5_000, attempt, backoff)).toBeGreaterThanOrEqual(5_000);
      }
    }
  });

  it('retries retryable errors, throws others at once, and gives up when the next try would pass the deadline', async () => {
    let calls = 0;
    await expect(
      withRetries(
        async () => {
          calls += 1;
          if (calls < 3) throw unavailable(1);
          return 'ok';
        },
        { ...backoff, baseDelayMs: 1, deadlineAt: monotonicNow() + 10_000 },
      ),
    ).resolves.toBe('ok');
    expect(calls).toBe(3);

    calls = 0;
    const held = new LockHeldError('held', 'lock_held', 409, undefined, 1_000);
    await expect(
      withRetries(
        async () => {
          calls += 1;
          throw held;
        },
        { ...backoff, deadlineAt: monotonicNow() + 10_000 },
      ),
    ).rejects.toBe(held);
    expect(calls).toBe(1);

    // Retry-After 60 s with a 1 s budget: the 503 is thrown at once instead of sleeping past the deadline.
    calls = 0;
    const started = monotonicNow();
    await expect(
      withRetries(
        async () => {
          calls += 1;
          throw unavailable(60_000);
        },
        { ...backoff, deadlineAt: started + 1_000 },
      ),
    ).rejects.toBeInstanceOf(UnavailableError);
    expect(calls).toBe(1);
  });

  it("maps problem codes to error classes; the body's retryAfterMs beats the header's whole seconds", () => {
    const problem = {
      type: 'urn:keyholder:problem:lock_held',
      title: 'Lock is held',
      status: 409,
      detail: 'held',
      code: 'lock_held',
      retryAfterMs: 1234,
    };
    const err = errorFromResponse(new Response(null, { status: 409, headers: { 'retry-after': '2' } }), problem);
    expect(err).toBeInstanceOf(LockHeldError);
    expect(err.retryAfterMs).toBe(1234);
    expect(err.retryable).toBe(false);
    const bare = errorFromResponse(new Response(null, { status: 503, headers: { 'retry-after': '3' } }), 'Service Unavailable');
    expect(bare).toBeInstanceOf(UnavailableError);
    expect(bare.retryAfterMs).toBe(3_000);
    expect(bare.retryable).toBe(true);
    const unknown = errorFromResponse(new Response(null, { status: 418 }), { ...problem, code: 'teapot' });
    expect(unknown).toBeInstanceOf(KeyholderError);
    expect(unknown.code).toBe('teapot');
  });
});
