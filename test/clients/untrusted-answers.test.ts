import { Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  InvalidResponseError,
  KeyholderClient,
  type KeyholderClientOptions,
  LeaseLostError,
  RedirectError,
  TlsError,
} from '../../src/client/index.js';
import { HostileServers } from '../helpers/hostile-servers.js';
import { requireTool } from '../helpers/tools.js';

const API_KEY = 'kh_secret_that_must_stay_home';

/**
 * The TypeScript client against servers that answer like a keyholder gone wrong: every answer that is not
 * a 200 with a well-formed body is refused with a typed error at once (no retries), and no redirect is
 * followed, so the API key never reaches another origin.
 */
describe('TypeScript client: answers it must not trust', { timeout: 60_000 }, () => {
  let hostile: HostileServers;
  let trustingAgent: Agent;

  beforeAll(async () => {
    requireTool('openssl', 'openssl', ['version']);
    hostile = await HostileServers.start();
    trustingAgent = new Agent({ connect: { ca: hostile.caPem } });
  });

  afterAll(async () => {
    await trustingAgent?.close();
    await hostile?.close();
  });

  const client = (baseUrl: string, options: Partial<KeyholderClientOptions> = {}) =>
    new KeyholderClient({ baseUrl, apiKey: API_KEY, retryBudgetMs: 5_000, ...options });

  /** The acquire's error, after checking that it came on the first try (refusals are not retried). */
  async function acquireError(kh: KeyholderClient, retries: unknown[]): Promise<unknown> {
    const err = await kh.acquire('k', { ttlMs: 10_000 }).then(
      (lease) => lease.release().then(() => new Error(`a lease was returned: ${JSON.stringify(lease)}`)),
      (e: unknown) => e,
    );
    expect(retries).toEqual([]);
    return err;
  }

  it('the control: a well-formed 200 is a lease, over http and over https with the CA passed', async () => {
    for (const kh of [client(`${hostile.http}/grant`), client(`${hostile.https}/grant`, { dispatcher: trustingAgent })]) {
      const lease = await kh.acquire('k', { ttlMs: 10_000 });
      expect([lease.ownerToken, lease.fencingToken, lease.ttlMs]).toEqual(['hostile-owner-token-0001', 7, 10_000]);
      await lease.release();
    }
  });

  it('a redirect to another origin: RedirectError; the other origin never sees the request or the API key', async () => {
    const retries: unknown[] = [];
    const err = await acquireError(client(`${hostile.http}/redirect-other`, { onRetry: (e) => retries.push(e) }), retries);
    expect(hostile.otherSeen).toEqual([]);
    expect(err).toBeInstanceOf(RedirectError);
    expect(err).toMatchObject({ code: 'redirected', status: 302, location: `${hostile.other}/v1/locks/k/acquire` });
  });

  it('https redirecting to http: RedirectError, nothing sent in clear', async () => {
    const retries: unknown[] = [];
    const kh = client(`${hostile.https}/to-http`, { dispatcher: trustingAgent, onRetry: (e) => retries.push(e) });
    const err = await acquireError(kh, retries);
    expect(hostile.otherSeen).toEqual([]);
    expect(err).toBeInstanceOf(RedirectError);
    expect((err as RedirectError).location?.startsWith('http://')).toBe(true);
  });

  it('a fetch that follows redirects itself: its answer is refused (response.redirected)', async () => {
    // Last of the redirect cases: this fetch does reach the other origin (its own choice; Node's fetch drops
    // the Authorization header on a cross-origin redirect, but the other origin's body would be the answer).
    const following = (request: Request) => fetch(new Request(request, { redirect: 'follow' }));
    const err = await acquireError(client(`${hostile.http}/redirect-other`, { fetch: following }), []);
    expect(err).toBeInstanceOf(RedirectError);
    expect(hostile.otherSeen).toHaveLength(1);
  });

  it.each([
    ['empty-200', /ownerToken/],
    ['wrong-types', /fencingToken/],
    ['not-json', /not a keyholder answer/],
    ['created', /HTTP 201/],
    ['no-content', /HTTP 204/],
  ])('%s: InvalidResponseError, no lease', async (behaviour, detail) => {
    const retries: unknown[] = [];
    const err = await acquireError(client(`${hostile.http}/${behaviour}`, { onRetry: (e) => retries.push(e) }), retries);
    expect(err).toBeInstanceOf(InvalidResponseError);
    expect(err).toMatchObject({ code: 'invalid_response', retryable: false });
    expect((err as Error).message).toMatch(detail);
  });

  it('a certificate the client does not trust: TlsError, not retried as unreachable', async () => {
    const retries: unknown[] = [];
    const err = await acquireError(client(`${hostile.https}/grant`, { onRetry: (e) => retries.push(e) }), retries);
    expect(err).toBeInstanceOf(TlsError);
    expect(err).toMatchObject({ code: 'tls_failed', retryable: false });
    expect((err as Error).message).toMatch(/DEPTH_ZERO_SELF_SIGNED_CERT/);
  });

  it('a renewal that carries another fencing token than the lease: the lease is lost, not carried on', async () => {
    const kh = client(`${hostile.http}/other-token`);
    const lease = await kh.acquire('k', { ttlMs: 600 });
    expect(lease.fencingToken).toBe(7);
    // The first renewal comes at about a third of the TTL; the lease may not outlive the TTL it was granted.
    const reason = await Promise.race([
      new Promise<unknown>((resolve) => lease.signal.addEventListener('abort', () => resolve(lease.signal.reason), { once: true })),
      new Promise<unknown>((resolve) => setTimeout(() => resolve('still held after 5 s'), 5_000)),
    ]);
    expect(reason).toBeInstanceOf(LeaseLostError);
    expect(reason).toMatchObject({ reason: 'renew_failed' });
    expect(((reason as LeaseLostError).cause as Error).message).toMatch(/fencingToken 8.*7/);
    expect(lease.fencingToken).toBe(7);
  });

  it('the renewal before a replayed grant is handed out carries another fencing token: no lease', async () => {
    const kh = client(`${hostile.http}/other-token`);
    const err = await kh.acquire('k', { ttlMs: 10_000, idempotencyKey: 'replayed' }).then(
      (lease) => lease.release().then(() => new Error(`a lease was returned with token ${lease.fencingToken}`)),
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(LeaseLostError);
    expect(err).toMatchObject({ reason: 'renew_failed' });
  });
});
