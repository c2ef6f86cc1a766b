import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { twoTeamsAndAdmin } from '../helpers/api-keys.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * The admin history route the console's key view reads: a lease's end as it happened. A key of a lock set
 * force-released by an operator, and the set given back afterwards: the store freed only the other keys.
 */
describe('admin lease history (GET /v1/history/...) after a force release of a lock set key', () => {
  const cast = twoTeamsAndAdmin();
  let server: TestApp;
  const call = async (method: string, url: string, headers: Record<string, string>, payload?: object) => {
    const res = await server.app.inject({ method: method as 'GET', url, headers, ...(payload === undefined ? {} : { payload }) });
    return { status: res.statusCode, body: res.json<Record<string, unknown>>() };
  };

  beforeAll(async () => {
    server = await buildTestApp({ auth: { mode: 'keys', keyring: cast.keys.keyring() }, logLevel: 'warn' });
  });
  afterAll(async () => server?.close());

  it('the force-released key ends force-released (by the operator), not released by the set later', async () => {
    const set = await call('POST', '/v1/lock-sets/acquire', cast.A, { keys: ['acct:1', 'acct:2'], ttlMs: 60_000, holder: 'transfer-9' });
    expect(set.status).toBe(200);
    const token = (set.body.locks as Array<{ key: string; fencingToken: number }>)[0]!.fencingToken;
    expect((await call('DELETE', `/v1/locks/acct:1?namespace=team-a&fencingToken=${token}`, cast.ADMIN)).status).toBe(200);
    // The holder gives the set back: only acct:2 was still its own.
    expect(
      (await call('POST', '/v1/lock-sets/release', cast.A, { ownerToken: set.body.ownerToken, keys: ['acct:1', 'acct:2'] })).status,
    ).toBe(200);
    const history = async (key: string) =>
      (await call('GET', `/v1/history/locks/${key}?namespace=team-a`, cast.ADMIN)).body.events as Array<{ type: string; by?: string }>;
    await vi.waitFor(async () => expect((await history('acct:2')).map((e) => e.type)).toEqual(['granted', 'released']), {
      timeout: 5_000,
      interval: 20,
    });
    const events = await history('acct:1');
    expect(events.map((e) => e.type)).toEqual(['granted', 'force_released']);
    expect(events[1]!.by).toBe('ops-key');
  });
});
