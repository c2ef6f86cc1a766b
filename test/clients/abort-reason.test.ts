import { describe, expect, it } from 'vitest';
import { KeyholderClient } from '../../src/client/index.js';

/** A server that answers every request 503 store_unavailable with retryAfterMs, so each call waits to retry. */
const unavailable = async () =>
  new Response(
    JSON.stringify({
      type: 'urn:keyholder:problem:store_unavailable',
      title: 'Store unavailable',
      status: 503,
      detail: 'down',
      code: 'store_unavailable',
      retryAfterMs: 5_000,
    }),
    { status: 503, headers: { 'content-type': 'application/problem+json', 'retry-after': '5' } },
  );

/**
 * An AbortSignal passed to a call ends it with the signal's own reason (as documented for `signal`),
 * also when it aborts while the call waits to retry a 503: the caller tells its own shutdown apart
 * from the client's errors by that reason.
 */
describe('a call whose signal aborts while it waits to retry', () => {
  const reason = new Error('the caller is shutting down');

  /** A client that aborts `controller` once the wait for its first retry (5 s) has begun. */
  const clientAbortingAtRetry = (controller: AbortController) =>
    new KeyholderClient({
      baseUrl: 'http://127.0.0.1:1',
      fetch: unavailable,
      onRetry: () => setImmediate(() => controller.abort(reason)),
    });

  it('acquire rejects with the signal reason', async () => {
    const controller = new AbortController();
    await expect(clientAbortingAtRetry(controller).acquire('k', { ttlMs: 1_000, signal: controller.signal })).rejects.toBe(reason);
  });

  it('campaign rejects with the signal reason', async () => {
    const controller = new AbortController();
    await expect(clientAbortingAtRetry(controller).campaign('k', { ttlMs: 1_000, signal: controller.signal })).rejects.toBe(reason);
  });

  it('inspect rejects with the signal reason', async () => {
    const controller = new AbortController();
    await expect(clientAbortingAtRetry(controller).inspect('k', { signal: controller.signal })).rejects.toBe(reason);
  });
});
