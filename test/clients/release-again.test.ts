import { describe, expect, it } from 'vitest';
import { KeyholderClient, KeyholderError } from '../../src/client/index.js';

/**
 * A release that failed gave nothing back for sure, so release() again tries again (as Go's Release does,
 * TestAReleaseRetriedAfterACancelledOneReleases). Before, the second call resolved at once without sending
 * anything, as if released, and the lock stayed held by nobody until its TTL.
 */
describe('lease.release() after a release that failed', () => {
  it('sends the release again and resolves once the server confirms it', async () => {
    const releases: number[] = [];
    const answer = (status: number, body: unknown) =>
      new Response(JSON.stringify(body), {
        status,
        headers: { 'content-type': status === 200 ? 'application/json' : 'application/problem+json' },
      });
    const fetch = async (request: Request) => {
      const route = new URL(request.url).pathname.split('/').pop();
      const expiresAt = new Date(Date.now() + 10_000).toISOString();
      if (route === 'acquire')
        return answer(200, { key: 'k', ownerToken: 'owner-token-0001', fencingToken: 7, ttlMs: 10_000, expiresAt, holder: null });
      if (route === 'renew') return answer(200, { key: 'k', fencingToken: 7, ttlMs: 10_000, expiresAt });
      releases.push(releases.length + 1);
      // The first release meets a server error (not retried); the next one is answered.
      return releases.length === 1
        ? answer(500, { type: 'urn:keyholder:problem:internal_error', title: 'Internal error', status: 500, code: 'internal_error' })
        : answer(200, { key: 'k', released: true });
    };
    const kh = new KeyholderClient({ baseUrl: 'http://127.0.0.1:1', fetch });
    const lease = await kh.acquire('k', { ttlMs: 10_000 });
    await expect(lease.release()).rejects.toBeInstanceOf(KeyholderError);
    await lease.release();
    expect(releases).toEqual([1, 2]);
    // Once one succeeded, there is nothing left to give back.
    await lease.release();
    expect(releases).toEqual([1, 2]);
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
