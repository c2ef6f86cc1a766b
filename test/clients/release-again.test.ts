import { describe, expect, it } from 'vitest';
import { KeyholderClient, KeyholderError, type Lease, LeaseLostError } from '../../src/client/index.js';

/**
 * A release that failed gave nothing back for sure, so release() again tries again (as Go's Release does,
 * TestAReleaseRetriedAfterACancelledOneReleases). Before, the second call resolved at once without sending
 * anything, as if released, and the lock stayed held by nobody until its TTL.
 */
describe('lease.release() after a release that failed', () => {
  it('sends the release again and resolves once the server confirms it', async () => {
    const { kh, releases } = failingFirstRelease(10_000);
    const lease = await kh.acquire('k', { ttlMs: 10_000 });
    await expect(lease.release()).rejects.toBeInstanceOf(KeyholderError);
    await lease.release();
    expect(releases).toEqual(['failed', 'released']);
    // Once one succeeded, there is nothing left to give back.
    await lease.release();
    expect(releases).toEqual(['failed', 'released']);
    expect(lease.signal.aborted).toBe(false);
  });

  it('keep() still leaves nothing for release() to send', async () => {
    let releases = 0;
    const fetch = async (request: Request) => {
      const route = new URL(request.url).pathname.split('/').pop();
      if (route === 'release') releases += 1;
      const expiresAt = new Date(Date.now() + 10_000).toISOString();
      return new Response(
        JSON.stringify({
          key: 'k',
          ownerToken: 'owner-token-0001',
          fencingToken: 7,
          ttlMs: 10_000,
          expiresAt,
          holder: null,
          released: true,
        }),
        { status: 200, headers: { 'content-type': 'application/json' } },
      );
    };
    const lease = await new KeyholderClient({ baseUrl: 'http://127.0.0.1:1', fetch }).acquire('k', { ttlMs: 10_000 });
    lease.keep();
    await lease.release();
    expect(releases).toBe(0);
  });
});

/**
 * A fake server for one lease on "k": grants and renews it for `ttlMs`, and answers the first release with a
 * server error (500, not retried) and later ones with success. `renew` may be replaced (a renewal that hangs).
 */
function failingFirstRelease(ttlMs: number, renew?: (request: Request) => Promise<Response>) {
  const releases: string[] = [];
  const answer = (status: number, body: unknown) =>
    new Response(JSON.stringify(body), {
      status,
      headers: { 'content-type': status === 200 ? 'application/json' : 'application/problem+json' },
    });
  const fetch = async (request: Request) => {
    const route = new URL(request.url).pathname.split('/').pop();
    const expiresAt = new Date(Date.now() + ttlMs).toISOString();
    if (route === 'acquire')
      return answer(200, { key: 'k', ownerToken: 'owner-token-0001', fencingToken: 7, ttlMs, expiresAt, holder: null });
    if (route === 'renew') return renew ? renew(request) : answer(200, { key: 'k', fencingToken: 7, ttlMs, expiresAt });
    releases.push(releases.length === 0 ? 'failed' : 'released');
    return releases.length === 1
      ? answer(500, { type: 'urn:keyholder:problem:internal_error', title: 'Internal error', status: 500, code: 'internal_error' })
      : answer(200, { key: 'k', released: true });
  };
  return { kh: new KeyholderClient({ baseUrl: 'http://127.0.0.1:1', fetch }), releases };
}

/** Resolves with the signal's reason once it aborts; rejects if it has not within `ms`. */
const lostWithin = (signal: AbortSignal, ms: number) =>
  new Promise<unknown>((resolve, reject) => {
    if (signal.aborted) return resolve(signal.reason);
    const timer = setTimeout(() => reject(new Error(`signal not aborted within ${ms} ms`)), ms);
    signal.addEventListener('abort', () => (clearTimeout(timer), resolve(signal.reason)), { once: true });
  });

/**
 * After a release that failed the lease is not renewed again: it runs out at its TTL unless a release or
 * keep() comes first, and the loss is reported at its safe deadline (as the Go client's Lease does).
 */
describe('a lease whose release failed', () => {
  it('keep() after it keeps the lease: withLock releases nothing more, and the lease is not lost', async () => {
    const { kh, releases } = failingFirstRelease(10_000);
    let kept: Lease | undefined;
    await kh.withLock('k', { ttlMs: 10_000 }, async (lease) => {
      kept = lease;
      await expect(lease.release()).rejects.toBeInstanceOf(KeyholderError);
      lease.keep();
    });
    // Only the release that failed was sent: the key stays held for its period, as keep() promises.
    expect(releases).toEqual(['failed']);
    expect(kept?.signal.aborted).toBe(false);
    await kept?.release();
    expect(releases).toEqual(['failed']);
  });

  it('is lost at its safe deadline (signal, lost); a release after that sends nothing', async () => {
    const { kh, releases } = failingFirstRelease(600);
    const lease = await kh.acquire('k', { ttlMs: 600 });
    await expect(lease.release()).rejects.toBeInstanceOf(KeyholderError);
    const reason = await lostWithin(lease.signal, 5_000);
    expect(reason).toBeInstanceOf(LeaseLostError);
    expect((reason as LeaseLostError).reason).toBe('deadline');
    expect(lease.lost).toBe(true);
    await lease.release();
    expect(releases).toEqual(['failed']);
  });

  it('withLock throws LeaseLostError when fn went on past the safe deadline after its release failed', async () => {
    const { kh, releases } = failingFirstRelease(600);
    const run = kh.withLock('k', { ttlMs: 600 }, async (lease) => {
      await lease.release().catch(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, 1_000)); // past the 600 ms TTL: unlocked by now
      return 'done';
    });
    await expect(run).rejects.toBeInstanceOf(LeaseLostError);
    expect(releases).toEqual(['failed']);
  });

  it('a renewal sent before the release and answered after it failed is no loss of its own: the lease is lost at its deadline', async () => {
    let renewing = () => undefined as void;
    const renewSent = new Promise<void>((resolve) => (renewing = resolve));
    let answerRenewal = () => undefined as void;
    const releaseFailed = new Promise<void>((resolve) => (answerRenewal = resolve));
    // The first renewal (at about a third of the TTL) is answered, with a server error, only once the
    // release has failed: the watch is back by then, and this renewal was over when the release was sent.
    const { kh } = failingFirstRelease(1_500, async () => {
      renewing();
      await releaseFailed;
      return new Response(
        JSON.stringify({ type: 'urn:keyholder:problem:internal_error', title: 'Internal error', status: 500, code: 'internal_error' }),
        { status: 500, headers: { 'content-type': 'application/problem+json' } },
      );
    });
    const lease = await kh.acquire('k', { ttlMs: 1_500 });
    await renewSent;
    await expect(lease.release()).rejects.toBeInstanceOf(KeyholderError);
    answerRenewal();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(lease.signal.aborted, 'lost (renew_failed) before its safe deadline').toBe(false);
    const reason = await lostWithin(lease.signal, 5_000);
    expect((reason as LeaseLostError).reason).toBe('deadline');
  });
});
