import { describe, expect, it, vi } from 'vitest';
import { KeyholderClient } from '../../src/client/index.js';

/** A keyholder stand-in for one key: grants, renews and releases, and records each route asked. */
function standIn() {
  const asked: string[] = [];
  const answer = (body: unknown) => new Response(JSON.stringify(body), { status: 200, headers: { 'content-type': 'application/json' } });
  const fetch = async (request: Request) => {
    const route = new URL(request.url).pathname.split('/').pop() ?? '';
    asked.push(route);
    const expiresAt = new Date(Date.now() + 300).toISOString();
    if (route === 'acquire')
      return answer({ key: 'k', ownerToken: 'owner-token-0001', fencingToken: 7, ttlMs: 300, expiresAt, holder: null });
    if (route === 'renew') return answer({ key: 'k', fencingToken: 7, ttlMs: 300, expiresAt });
    return answer({ key: 'k', released: true });
  };
  return { asked, fetch };
}

/**
 * withLock releases the lock whatever happens: also when the application's wrapHold fails before it ran
 * the hold (a tracer that throws, say). Before, the lease was left renewing itself, and the lock held
 * by nobody's work for as long as the process lived.
 */
describe('withLock with a wrapHold that fails before running the hold', () => {
  it('rethrows its error and gives the lock back', async () => {
    const server = standIn();
    const failure = new Error('no tracer');
    const kh = new KeyholderClient({ baseUrl: 'http://127.0.0.1:1', fetch: server.fetch, wrapHold: () => Promise.reject(failure) });
    const fn = vi.fn();
    await expect(kh.withLock('k', { ttlMs: 300 }, fn)).rejects.toBe(failure);
    expect(fn).not.toHaveBeenCalled();
    await vi.waitFor(() => expect(server.asked).toContain('release'), { timeout: 5_000 });
  });

  it('the same for a wrapHold that throws synchronously', async () => {
    const server = standIn();
    const failure = new Error('no tracer');
    const kh = new KeyholderClient({
      baseUrl: 'http://127.0.0.1:1',
      fetch: server.fetch,
      wrapHold: () => {
        throw failure;
      },
    });
    await expect(kh.withLock('k', { ttlMs: 300 }, () => 'done')).rejects.toBe(failure);
    await vi.waitFor(() => expect(server.asked).toContain('release'), { timeout: 5_000 });
  });
});
