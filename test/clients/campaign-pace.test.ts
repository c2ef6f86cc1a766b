import { describe, expect, it } from 'vitest';
import { KeyholderClient } from '../../src/client/index.js';

/** A server whose lock stays held: every acquire is answered 409 lock_held with retryAfterMs. */
function heldLock(retryAfterMs: number) {
  const sent: number[] = [];
  const fetch = async () => {
    sent.push(performance.now());
    // An answer comes in a later turn of the event loop, as over a socket.
    await new Promise((resolve) => setImmediate(resolve));
    return new Response(
      JSON.stringify({
        type: 'urn:keyholder:problem:lock_held',
        title: 'Lock held',
        status: 409,
        detail: 'held',
        code: 'lock_held',
        retryAfterMs,
      }),
      { status: 409, headers: { 'content-type': 'application/problem+json' } },
    );
  };
  return { sent, fetch };
}

/**
 * A campaign whose turns do not wait in the queue (waitMs 0) asks again when the server says the lock
 * may be free (its retryAfterMs), not at once: a follower must not send the leader's server hundreds of
 * requests a second while the lock stays held.
 */
describe('campaign with waitMs 0 against a held lock', () => {
  it("paces its turns by the 409's retryAfterMs", async () => {
    const server = heldLock(200);
    const client = new KeyholderClient({ baseUrl: 'http://127.0.0.1:1', fetch: server.fetch });
    const controller = new AbortController();
    const campaign = client.campaign('leader', { ttlMs: 1_000, waitMs: 0, signal: controller.signal });
    const stopped = expect(campaign).rejects.toBe('stop');
    // Three turns take at least two waits of 200 ms: no faster, whatever the machine's speed.
    while (server.sent.length < 3) await new Promise((resolve) => setTimeout(resolve, 10));
    controller.abort('stop');
    await stopped;
    const sent = server.sent;
    expect(sent[1]! - sent[0]!).toBeGreaterThanOrEqual(190);
    expect(sent[2]! - sent[1]!).toBeGreaterThanOrEqual(190);
  });

  it('with waitMs above 0 it queues again at once after a turn ran out (the wait was in the server)', async () => {
    const server = heldLock(60_000);
    const client = new KeyholderClient({ baseUrl: 'http://127.0.0.1:1', fetch: server.fetch });
    const controller = new AbortController();
    const campaign = client.campaign('leader', { ttlMs: 1_000, waitMs: 1_000, signal: controller.signal });
    const stopped = expect(campaign).rejects.toBe('stop');
    while (server.sent.length < 3) await new Promise((resolve) => setTimeout(resolve, 5));
    controller.abort('stop');
    await stopped;
  });
});
