import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { makeKeys } from '../helpers/api-keys.js';
import { KeyholderProcess } from '../helpers/keyholder-process.js';
import { RedisServer } from '../helpers/redis-server.js';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Two real keyholder processes on one real redis-server: rate limits and namespace quotas hold across
 * instances, SIGHUP reloads keys without dropping connections, and a Redis outage turns lock calls
 * into 503s, never 500s. Plus the start-up rules for running without keys.
 */

const keys = makeKeys([
  { id: 'rate-key', namespace: 'rate-ns', scopes: ['locks'] },
  { id: 'team-a-key', namespace: 'team-a', scopes: ['locks'] },
  { id: 'team-b-key', namespace: 'team-b', scopes: ['locks'] },
  { id: 'team-d-key', namespace: 'team-d', scopes: ['locks'] },
  { id: 'team-d-doomed', namespace: 'team-d', scopes: ['locks'] },
]);
const later = makeKeys([{ id: 'new-key', namespace: 'team-c', scopes: ['locks'] }]);

async function call(
  base: string,
  method: 'GET' | 'POST',
  path: string,
  key: string | undefined,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown>; headers: Headers }> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      ...(key === undefined ? {} : { authorization: `Bearer ${key}` }),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(5_000),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {}, headers: res.headers };
}

describe('two instances on one Redis', () => {
  let redis: RedisServer;
  let one: KeyholderProcess;
  let two: KeyholderProcess;
  let keysFile: string;

  beforeAll(async () => {
    redis = await RedisServer.start();
    keysFile = keys.writeFile();
    const env = {
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: `inst-${randomUUID().slice(0, 8)}:`,
      KEYHOLDER_API_KEYS_FILE: keysFile,
      RATE_LIMIT_MAX: '20',
      RATE_LIMIT_WINDOW_MS: '5000',
      NAMESPACE_MAX_HELD_LOCKS: '3',
    };
    [one, two] = await Promise.all([KeyholderProcess.start({ env }), KeyholderProcess.start({ env })]);
  });
  afterAll(async () => {
    await Promise.all([one?.stop(), two?.stop()]);
    await redis?.stop();
  });

  it('the rate limit is shared: 20 requests spread over both instances, then 429 on either; it recovers', async () => {
    const key = keys.plain['rate-key'];
    for (let i = 0; i < 20; i++) {
      const res = await call(i % 2 === 0 ? one.url : two.url, 'GET', '/v1/locks/r', key);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    }
    let retryAfterMs = 0;
    for (const base of [one.url, two.url]) {
      const res = await call(base, 'GET', '/v1/locks/r', key);
      expect(res.status).toBe(429);
      expect(res.body.code).toBe('rate_limited');
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      retryAfterMs = Math.max(retryAfterMs, Number(res.body.retryAfterMs));
    }
    // Other keys are counted separately.
    expect((await call(one.url, 'GET', '/v1/locks/r', keys.plain['team-b-key'])).status).toBe(200);
    await sleep(retryAfterMs + 200);
    expect((await call(two.url, 'GET', '/v1/locks/r', key)).status).toBe(200);
  });

  it('the namespace quota is shared: 3 locks across both instances, the 4th refused on either; a release makes room', async () => {
    const a = keys.plain['team-a-key'];
    const grants: Array<Record<string, unknown>> = [];
    for (const [i, base] of [one.url, two.url, one.url].entries()) {
      const res = await call(base, 'POST', `/v1/locks/q${i}/acquire`, a, { ttlMs: 30_000 });
      expect(res.status).toBe(200);
      grants.push(res.body);
    }
    for (const base of [one.url, two.url]) {
      const res = await call(base, 'POST', '/v1/locks/q3/acquire', a, { ttlMs: 30_000 });
      expect(res.status).toBe(429);
      expect(res.body.code).toBe('quota_exceeded');
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    }
    expect((await call(two.url, 'POST', '/v1/locks/q3/acquire', keys.plain['team-b-key'], { ttlMs: 30_000 })).status).toBe(200);
    expect((await call(two.url, 'POST', '/v1/locks/q0/release', a, { ownerToken: grants[0]?.ownerToken })).status).toBe(200);
    expect((await call(one.url, 'POST', '/v1/locks/q3/acquire', a, { ttlMs: 30_000 })).status).toBe(200);
  });

  it('SIGHUP reloads the keys without dropping an open connection; a bad file keeps the old keys', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const viaAgent = (key: string) =>
      new Promise<{ status: number; localPort: number }>((resolve, reject) => {
        const req = httpRequest(`${one.url}/v1/locks/reload`, { agent, headers: { authorization: `Bearer ${key}` } }, (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode ?? 0, localPort: req.socket?.localPort ?? -1 }));
        });
        req.on('error', reject);
        req.end();
      });
    try {
      const before = await viaAgent(keys.plain['team-a-key'] ?? '');
      expect(before.status).toBe(200);
      expect((await viaAgent(later.plain['new-key'] ?? '')).status).toBe(401);

      // The new file: only the new key.
      writeFileSync(keysFile, readFileText(later));
      process.kill(one.pid ?? 0, 'SIGHUP');
      const after = await vi.waitFor(
        async () => {
          const res = await viaAgent(later.plain['new-key'] ?? '');
          expect(res.status).toBe(200);
          return res;
        },
        { timeout: 10_000, interval: 50 },
      );
      // Same TCP connection before and after the reload.
      expect(after.localPort).toBe(before.localPort);
      expect((await viaAgent(keys.plain['team-a-key'] ?? '')).status).toBe(401);

      // A broken file: an error is logged and the keys in force stay.
      writeFileSync(keysFile, 'keys: [ {id: broken');
      process.kill(one.pid ?? 0, 'SIGHUP');
      await vi.waitFor(() => expect(one.logs.some((l) => l.includes('API keys NOT reloaded'))).toBe(true), {
        timeout: 10_000,
        interval: 50,
      });
      expect(one.jsonLogs().find((l) => String(l.msg).includes('API keys NOT reloaded'))).toMatchObject({ level: 50 });
      expect((await viaAgent(later.plain['new-key'] ?? '')).status).toBe(200);

      // Back to the original keys for the tests that follow.
      writeFileSync(keysFile, readFileText(keys));
      process.kill(one.pid ?? 0, 'SIGHUP');
      await vi.waitFor(async () => expect((await viaAgent(keys.plain['team-b-key'] ?? '')).status).toBe(200), {
        timeout: 10_000,
        interval: 50,
      });
    } finally {
      agent.destroy();
    }
  });

  it("SIGHUP that revokes a key answers the key's queued acquire 401 at once; the lock goes to the waiter behind it, on the other instance", async () => {
    const holderKey = keys.plain['team-d-key'];
    const callers = new AbortController();
    const waiting = (base: string, key: string | undefined, holder: string) => {
      const answer = fetch(`${base}/v1/locks/revoked/acquire`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ ttlMs: 30_000, waitMs: 25_000, holder }),
        signal: callers.signal,
      }).then(async (res) => ({ status: res.status, body: (await res.json()) as Record<string, unknown> }));
      const seen: { got?: { status: number; body: Record<string, unknown> } } = {};
      void answer.then((got) => (seen.got = got)).catch(() => undefined);
      return { answer, seen };
    };
    const queue = async () =>
      ((await call(two.url, 'GET', '/v1/locks/revoked?queue=true', holderKey)).body.queue as Array<{ holder: string }>).map(
        (q) => q.holder,
      );
    const reloads = () => one.logs.filter((l) => l.includes('API keys reloaded')).length;
    try {
      const held = await call(two.url, 'POST', '/v1/locks/revoked/acquire', holderKey, { ttlMs: 30_000 });
      expect(held.status).toBe(200);
      const doomed = waiting(one.url, keys.plain['team-d-doomed'], 'doomed');
      await vi.waitFor(async () => expect(await queue()).toEqual(['doomed']), { timeout: 10_000, interval: 50 });
      const next = waiting(two.url, holderKey, 'next');
      await vi.waitFor(async () => expect(await queue()).toEqual(['doomed', 'next']), { timeout: 10_000, interval: 50 });

      writeFileSync(keysFile, readFileText({ ...keys, entries: keys.entries.filter((e) => e.id !== 'team-d-doomed') }));
      process.kill(one.pid ?? 0, 'SIGHUP');
      // Answered while the lock is still held: its wait did not outlive the key.
      await vi.waitFor(() => expect(doomed.seen.got).toMatchObject({ status: 401, body: { code: 'unauthenticated' } }), {
        timeout: 10_000,
        interval: 20,
      });
      expect(await queue()).toEqual(['next']);
      expect(next.seen.got).toBeUndefined();

      expect((await call(two.url, 'POST', '/v1/locks/revoked/release', holderKey, { ownerToken: held.body.ownerToken })).status).toBe(200);
      const granted = await next.answer;
      expect(granted.body).toMatchObject({ holder: 'next' });
      expect((await call(one.url, 'GET', '/v1/locks/revoked', holderKey)).body).toMatchObject({ held: true, holder: 'next' });
      await call(two.url, 'POST', '/v1/locks/revoked/release', holderKey, { ownerToken: granted.body.ownerToken });
    } finally {
      callers.abort();
      // Back to the original keys for the tests that follow.
      const before = reloads();
      writeFileSync(keysFile, readFileText(keys));
      process.kill(one.pid ?? 0, 'SIGHUP');
      await vi.waitFor(() => expect(reloads()).toBe(before + 1), { timeout: 10_000, interval: 50 });
    }
  });

  it('with Redis down, lock calls get 503 store_unavailable (never 500) quickly, and recover when it is back', async () => {
    const a = keys.plain['team-b-key'];
    await redis.kill();
    for (const base of [one.url, two.url]) {
      const started = performance.now();
      const acquire = await call(base, 'POST', '/v1/locks/down/acquire', a, { ttlMs: 5_000 });
      const inspect = await call(base, 'GET', '/v1/locks/down', a);
      expect(acquire.status).toBe(503);
      expect(acquire.body.code).toBe('store_unavailable');
      expect(inspect.status).toBe(503);
      // Neither the store nor the rate limiter waits for a Redis that is not there.
      expect(performance.now() - started).toBeLessThan(4_000);
    }
    await redis.launch();
    await Promise.all([one.waitUntil('readyz'), two.waitUntil('readyz')]);
    let attempt = 0;
    await vi.waitFor(
      async () => expect((await call(two.url, 'POST', `/v1/locks/up-${attempt++}/acquire`, a, { ttlMs: 5_000 })).status).toBe(200),
      { timeout: 10_000, interval: 50 },
    );
    for (const proc of [one, two]) expect(proc.logs.join('\n')).not.toMatch(/"statusCode":500|"status":500/);
  });
});

function readFileText(k: ReturnType<typeof makeKeys>): string {
  return `keys:\n${k.entries.map((e) => `  - id: ${e.id}\n    hash: ${e.hash}\n    namespace: ${e.namespace}\n    scopes: [${e.scopes.join(', ')}]\n`).join('')}`;
}

describe('starting without API keys', () => {
  it('NODE_ENV=production without a keys file refuses to start and names the variable', async () => {
    const started = KeyholderProcess.start({ env: { NODE_ENV: 'production', KEYHOLDER_STORE: 'memory' }, waitFor: 'livez' });
    await expect(started).rejects.toThrow(/KEYHOLDER_API_KEYS_FILE: is not set and NODE_ENV=production/);
  });

  it('open mode starts and says so in a warning', async () => {
    const proc = await KeyholderProcess.start({ env: { NODE_ENV: 'production', KEYHOLDER_STORE: 'memory', KEYHOLDER_AUTH: 'open' } });
    try {
      expect(proc.jsonLogs().find((l) => l.auth === 'open')).toMatchObject({ level: 40 });
      expect((await call(proc.url, 'POST', '/v1/locks/x/acquire', undefined, { ttlMs: 1_000 })).status).toBe(200);
    } finally {
      await proc.stop();
    }
  });

  it('a keys file that cannot be parsed stops the start with its path in the message', async () => {
    const path = keys.writeFile();
    writeFileSync(path, 'keys: nope');
    await expect(KeyholderProcess.start({ env: { KEYHOLDER_API_KEYS_FILE: path }, waitFor: 'livez' })).rejects.toThrow(path);
  });
});
