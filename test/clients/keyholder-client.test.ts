import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  KeyholderClient,
  LeaseLostError,
  LockHeldError,
  HolderChangedError,
  NotFoundError,
  NotOwnerError,
  type RetryEvent,
  UnavailableError,
} from '../../src/client/index.js';
import { KeyholderProcess } from '../helpers/keyholder-process.js';
import { RedisServer } from '../helpers/redis-server.js';

const key = (name: string) => `ts-lease-${randomUUID().slice(0, 8)}-${name}`;

/** A fetch that records when each request was sent and when its answer came back (monotonic ms). */
function recordingFetch() {
  const sent: Array<{ path: string; method: string; at: number; status?: number; answeredAt?: number }> = [];
  const fetchImpl = async (request: Request) => {
    const entry: (typeof sent)[number] = { path: new URL(request.url).pathname, method: request.method, at: performance.now() };
    sent.push(entry);
    const response = await fetch(request);
    entry.status = response.status;
    entry.answeredAt = performance.now();
    return response;
  };
  return { sent, fetch: fetchImpl };
}

/** Resolves with the time (monotonic ms) the signal aborted. */
const abortedAt = (signal: AbortSignal) =>
  new Promise<number>((resolve) => signal.addEventListener('abort', () => resolve(performance.now()), { once: true }));

describe('TypeScript client against a real server (embedded store)', { timeout: 90_000 }, () => {
  let server: KeyholderProcess;
  let kh: KeyholderClient;

  beforeAll(async () => {
    server = await KeyholderProcess.start({ env: { LOG_LEVEL: 'warn' } });
    kh = new KeyholderClient({ baseUrl: server.url });
  });

  afterAll(async () => {
    await server?.stop();
  });

  it('auto-renew keeps a 1 s lease alive for 5 s; release frees it', async () => {
    const k = key('renew');
    // A renewal must come back within about two thirds of the TTL. On a quiet machine a round trip takes
    // a few ms and the lease is 1 s; on a starved one (CI shares its cores) a single round trip can take
    // hundreds of ms, so the TTL is stretched to several times the slowest round trip measured here,
    // and the hold to five TTLs: the same renewal count is asked of it either way.
    let slowestMs = 0;
    for (let i = 0; i < 10; i++) {
      const sentAt = performance.now();
      await kh.inspect(k);
      slowestMs = Math.max(slowestMs, performance.now() - sentAt);
    }
    const ttlMs = Math.min(10_000, Math.max(1_000, Math.ceil(slowestMs * 8)));
    const recorder = recordingFetch();
    const client = new KeyholderClient({ baseUrl: server.url, fetch: recorder.fetch });
    const lease = await client.acquire(k, { ttlMs, holder: 'renewer' });
    const started = performance.now();
    // Five TTLs of checks from outside: the lock stays held by this lease the whole time.
    while (performance.now() - started < 5 * ttlMs) {
      const state = await kh.inspect(k);
      expect(state).toMatchObject({ held: true, holder: 'renewer', fencingToken: lease.fencingToken });
      expect(lease.signal.aborted).toBe(false);
      await new Promise((r) => setTimeout(r, ttlMs / 5));
    }
    await expect(kh.acquireGrant(k, { ttlMs: 1_000 })).rejects.toBeInstanceOf(LockHeldError);
    const renewals = recorder.sent.filter((r) => r.path.endsWith('/renew'));
    // About three renewals a TTL, every one confirmed.
    expect(renewals.length).toBeGreaterThanOrEqual(12);
    expect(renewals.every((r) => r.status === 200 || r.status === undefined)).toBe(true);
    await lease.release();
    expect(lease.signal.aborted).toBe(false);
    expect(await kh.inspect(k)).toMatchObject({ held: false });
  }, 120_000);

  it('campaign() elects one candidate at a time; observe() sees each leader and the vacancy, without polling', async () => {
    const k = key('election');
    const stop = new AbortController();
    const seen: Array<string | null> = [];
    const watching = (async () => {
      for await (const status of kh.observe(k, { signal: stop.signal, waitMs: 10_000 })) seen.push(status.held ? status.holder : null);
    })();
    const first = await kh.campaign(k, { ttlMs: 5_000, holder: 'first' });
    const second = kh.campaign(k, { ttlMs: 5_000, holder: 'second' });
    await vi.waitFor(() => expect(seen).toContain('first'), { timeout: 10_000 });
    await first.release();
    const leader = await second;
    expect(leader.fencingToken).toBeGreaterThan(first.fencingToken);
    await vi.waitFor(() => expect(seen).toContain('second'), { timeout: 10_000 });
    await leader.release();
    await vi.waitFor(() => expect(seen.at(-1)).toBeNull(), { timeout: 10_000 });
    stop.abort();
    await watching;
    // Each state once, in order (a hand-over may skip the vacancy between two leaders).
    expect(seen.filter((s) => s !== null)).toEqual(['first', 'second']);
  });

  it('a force release aborts lease.signal at the first renewal after it (not_owner)', async () => {
    const k = key('forced');
    const recorder = recordingFetch();
    const client = new KeyholderClient({ baseUrl: server.url, fetch: recorder.fetch });
    const ttlMs = 3_000;
    const lease = await client.acquire(k, { ttlMs });
    const aborted = abortedAt(lease.signal);
    await kh.forceRelease(k, 'default');
    const forcedAt = performance.now();
    const at = await aborted;
    const reason = lease.signal.reason as LeaseLostError;
    expect(reason).toBeInstanceOf(LeaseLostError);
    expect(reason.reason).toBe('not_owner');
    expect(reason.cause).toBeInstanceOf(NotOwnerError);
    // Within one renewal period: the renewal that was refused is the last one sent, and at most one was sent
    // after the force release (none, if one already in flight was refused).
    const renewals = recorder.sent.filter((r) => r.path.endsWith('/renew'));
    expect(renewals.at(-1)?.status).toBe(409);
    expect(at).toBeGreaterThanOrEqual(renewals.at(-1)?.answeredAt ?? Infinity);
    expect(renewals.filter((r) => r.at >= forcedAt).length).toBeLessThanOrEqual(1);
    expect(renewals.filter((r) => r.status === 409)).toHaveLength(1);
    await lease.release(); // nothing to give back: resolves
  });

  it('forceRelease with a fencingToken leaves a newer holder alone (HolderChangedError) and evicts the one named', async () => {
    const k = key('conditional');
    const old = await kh.acquireGrant(k, { ttlMs: 5_000 });
    await kh.release(k, old.ownerToken);
    const current = await kh.acquireGrant(k, { ttlMs: 5_000, holder: 'current' });
    const refused = await kh.forceRelease(k, 'default', { fencingToken: old.fencingToken }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(HolderChangedError);
    expect(refused).toMatchObject({ code: 'holder_changed', status: 409 });
    expect(await kh.inspect(k)).toMatchObject({ held: true, holder: 'current' });
    expect(await kh.forceRelease(k, 'default', { fencingToken: current.fencingToken })).toMatchObject({
      evicted: { fencingToken: current.fencingToken },
    });
  });

  it('requestRelease reaches the lease named: its next renewal sets lease.releaseRequested and calls the listeners once', async () => {
    const k = key('asked');
    // Renewals come every second or so; the lease stays held throughout (not an eviction).
    const lease = await kh.acquire(k, { ttlMs: 3_000, holder: 'worker' });
    const heard: Array<{ by: string; reason: string | null }> = [];
    lease.onReleaseRequested((request) => heard.push(request));
    expect(lease.releaseRequested).toBeNull();
    const asked = await kh.requestRelease(k, 'default', lease.fencingToken, { reason: 'deploy' });
    expect(asked).toMatchObject({ key: k, fencingToken: lease.fencingToken, releaseRequested: { by: 'anonymous', reason: 'deploy' } });
    await vi.waitFor(() => expect(lease.releaseRequested).toEqual(asked.releaseRequested), { timeout: 10_000, interval: 20 });
    // Later renewals carry the same request: no second call.
    const renewsBefore = lease.expiresAt;
    await vi.waitFor(() => expect(lease.expiresAt).not.toBe(renewsBefore), { timeout: 10_000, interval: 20 });
    expect(heard).toEqual([asked.releaseRequested]);
    // A listener added late hears it at once.
    const late: unknown[] = [];
    lease.onReleaseRequested((request) => late.push(request));
    expect(late).toEqual([asked.releaseRequested]);
    expect(lease.lost).toBe(false);
    const refused = await kh.requestRelease(k, 'default', lease.fencingToken + 1).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(HolderChangedError);
    await lease.release();
  });

  it("forceRelease and requestRelease name a semaphore's or a read/write lock's lease with `primitive`", async () => {
    // The client takes no permits itself: they are taken over plain HTTP, as another language's caller would.
    const post = async (path: string, body: unknown) => {
      const res = await fetch(`${server.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: res.status, json: (await res.json()) as Record<string, unknown> };
    };
    const take = async (path: string, body: unknown) => {
      const { status, json } = await post(path, body);
      expect(status, JSON.stringify(json)).toBe(200);
      return json as { ownerToken: string; fencingToken: number };
    };
    const s = key('sem');
    const [a, b] = [
      await take(`/v1/semaphores/${s}/acquire`, { limit: 2, ttlMs: 10_000 }),
      await take(`/v1/semaphores/${s}/acquire`, { limit: 2, ttlMs: 10_000 }),
    ];
    const asked = await kh.requestRelease(s, 'default', a.fencingToken, { reason: 'drain', primitive: 'semaphores' });
    expect(asked).toMatchObject({ key: s, fencingToken: a.fencingToken, releaseRequested: { reason: 'drain' } });
    // The lease named hears it in its renewal; the other permit does not.
    expect((await post(`/v1/semaphores/${s}/renew`, { ownerToken: a.ownerToken, ttlMs: 10_000 })).json).toMatchObject({
      releaseRequested: asked.releaseRequested,
    });
    expect((await post(`/v1/semaphores/${s}/renew`, { ownerToken: b.ownerToken, ttlMs: 10_000 })).json).not.toHaveProperty(
      'releaseRequested',
    );
    // A lock of the same name holds nothing: the call went to the semaphore, not to /v1/locks.
    expect(await kh.requestRelease(s, 'default', a.fencingToken).catch((err: unknown) => err)).toBeInstanceOf(NotFoundError);

    const evicted = await kh.forceRelease(s, 'default', { primitive: 'semaphores', fencingToken: a.fencingToken });
    expect(evicted).toEqual({ namespace: 'default', key: s, released: true, evicted: [{ holder: null, fencingToken: a.fencingToken }] });
    // The other permit is still its holder's; the one evicted is named no more.
    expect((await post(`/v1/semaphores/${s}/renew`, { ownerToken: b.ownerToken, ttlMs: 10_000 })).status).toBe(200);
    const again = await kh
      .forceRelease(s, 'default', { primitive: 'semaphores', fencingToken: a.fencingToken })
      .catch((err: unknown) => err);
    expect(again).toBeInstanceOf(HolderChangedError);

    const r = key('rw');
    const reader = await take(`/v1/rwlocks/${r}/acquire`, { mode: 'read', ttlMs: 10_000 });
    const other = await take(`/v1/rwlocks/${r}/acquire`, { mode: 'read', ttlMs: 10_000 });
    expect(await kh.requestRelease(r, 'default', reader.fencingToken, { primitive: 'rwlocks' })).toMatchObject({
      fencingToken: reader.fencingToken,
    });
    const all = await kh.forceRelease(r, 'default', { primitive: 'rwlocks' });
    expect(all.evicted.map((e) => e.fencingToken).sort((x, y) => x - y)).toEqual(
      [reader.fencingToken, other.fencingToken].sort((x, y) => x - y),
    );
    expect((await post(`/v1/rwlocks/${r}/renew`, { ownerToken: reader.ownerToken, ttlMs: 10_000 })).status).toBe(409);
  });

  it('inspect with queue: true lists the callers queued, head first, with their labels; without it, none', async () => {
    const k = key('queue');
    const held = await kh.acquireGrant(k, { ttlMs: 10_000, holder: 'holder' });
    const waiting = ['first', 'second'].map((holder) => kh.acquireGrant(k, { ttlMs: 10_000, waitMs: 20_000, holder }));
    // Both sent at once: the queue's order is whichever arrived first, so only the labels are compared as a set.
    await vi.waitFor(async () => expect(await kh.inspect(k, { queue: true })).toMatchObject({ held: true, waiters: 2 }), {
      timeout: 20_000,
      interval: 20,
    });
    const status = await kh.inspect(k, { queue: true });
    if (!status.held) throw new Error('the lock should still be held');
    expect(status.queue?.map((q) => q.position)).toEqual([1, 2]);
    expect(status.queue?.map((q) => q.holder).sort()).toEqual(['first', 'second']);
    for (const q of status.queue ?? []) expect(Date.parse(q.waitingSince)).toBeLessThanOrEqual(Date.now() + 60_000);
    expect(JSON.stringify(status)).not.toContain(held.ownerToken);
    const plain = await kh.inspect(k);
    expect(plain).not.toHaveProperty('queue');

    // The head of the queue is granted first, and then the queue is one shorter.
    const head = status.queue?.[0]?.holder;
    await kh.release(k, held.ownerToken);
    await vi.waitFor(async () => expect(await kh.inspect(k, { queue: true })).toMatchObject({ held: true, holder: head, waiters: 1 }), {
      timeout: 20_000,
      interval: 20,
    });
    const next = await kh.inspect(k, { queue: true });
    expect(next.held && next.queue?.map((q) => [q.position, q.holder])).toEqual([[1, head === 'first' ? 'second' : 'first']]);
    const granted = await Promise.race(waiting);
    expect(granted.holder).toBe(head);
    await kh.release(k, granted.ownerToken);
    const last = (await Promise.all(waiting)).find((g) => g.ownerToken !== granted.ownerToken);
    await kh.release(k, last?.ownerToken ?? '');
  });

  it("withLock releases after a throw and rethrows; returns fn's value otherwise", async () => {
    const k = key('with');
    const boom = new Error('boom');
    let seen: number | undefined;
    await expect(
      kh.withLock(k, { ttlMs: 5_000 }, async (lease) => {
        seen = lease.fencingToken;
        expect((await kh.inspect(k)).held).toBe(true);
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect(seen).toBeGreaterThan(0);
    expect(await kh.inspect(k)).toMatchObject({ held: false });
    await expect(kh.withLock(k, { ttlMs: 5_000 }, (lease) => lease.fencingToken)).resolves.toBeGreaterThan(seen ?? 0);
    expect(await kh.inspect(k)).toMatchObject({ held: false });
  });

  it('a held lock: LockHeldError with retryAfterMs; waitMs gets it when the holder releases', async () => {
    const k = key('held');
    const first = await kh.acquire(k, { ttlMs: 10_000 });
    const err = await kh.acquire(k, { ttlMs: 1_000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LockHeldError);
    expect((err as LockHeldError).retryAfterMs).toBeGreaterThan(0);
    const waiting = kh.acquire(k, { ttlMs: 1_000, waitMs: 20_000 });
    await vi.waitFor(
      async () => {
        const state = await kh.inspect(k);
        expect(state.held ? state.waiters : 0).toBe(1);
      },
      { timeout: 10_000 },
    );
    await first.release();
    const second = await waiting;
    expect(second.fencingToken).toBeGreaterThan(first.fencingToken);
    await second.release();
  });

  it('idempotent acquire: a retry with the same Idempotency-Key gets the same grant; another key gets 409', async () => {
    const k = key('idem');
    const first = await kh.acquireGrant(k, { ttlMs: 5_000, holder: 'first', idempotencyKey: 'retry-me' });
    // As if the first answer had been lost: the retry carries the same key and gets that grant back.
    const retried = await kh.acquireGrant(k, { ttlMs: 5_000, holder: 'first', idempotencyKey: 'retry-me' });
    expect(retried).toEqual(first);
    await expect(kh.acquireGrant(k, { ttlMs: 5_000, idempotencyKey: 'another' })).rejects.toBeInstanceOf(LockHeldError);
    await expect(kh.acquireGrant(k, { ttlMs: 5_000 })).rejects.toBeInstanceOf(LockHeldError);
    await kh.release(k, first.ownerToken);
    // Kept only as long as the lease: the same key now takes a new lease.
    const next = await kh.acquireGrant(k, { ttlMs: 5_000, idempotencyKey: 'retry-me' });
    expect(next.ownerToken).not.toBe(first.ownerToken);
    expect(next.fencingToken).toBeGreaterThan(first.fencingToken);
    await kh.release(k, next.ownerToken);
  });

  it('a paused server (SIGSTOP): the signal aborts at the safe deadline, before the lock can go to anyone else', async () => {
    const k = key('paused');
    const ttlMs = 2_000;
    const lease = await kh.acquire(k, { ttlMs });
    // One confirmed renewal first, so the deadline counts from a renewal's send time.
    const firstExpiry = lease.expiresAt;
    await vi.waitFor(() => expect(lease.expiresAt).not.toBe(firstExpiry), { timeout: 10_000, interval: 20 });

    const order: string[] = [];
    lease.signal.addEventListener('abort', () => order.push('aborted'));
    server.pause();
    try {
      // A contender, sent while the server is stopped: it sits in the socket until the server runs again.
      const contender = new KeyholderClient({ baseUrl: server.url, requestTimeoutMs: 60_000 });
      const contending = contender.acquireGrant(k, { ttlMs: 5_000, waitMs: 30_000 }).then((grant) => {
        order.push('contender granted');
        return grant;
      });
      // Resume the server no earlier than the store's own end of the lease (the lease's expiresAt, on this
      // machine's clock). The client's deadline timer is due earlier in this same process, so it must run first.
      const resumeInMs = Math.max(0, Date.parse(lease.expiresAt) - Date.now()) + 1;
      await new Promise<void>((resolve) =>
        setTimeout(() => {
          order.push('server resumed');
          server.resume();
          resolve();
        }, resumeInMs),
      );
      const grant = await contending;
      expect(order).toEqual(['aborted', 'server resumed', 'contender granted']);
      expect((lease.signal.reason as LeaseLostError).reason).toBe('deadline');
      expect(grant.fencingToken).toBeGreaterThan(lease.fencingToken);
      await contender.release(k, grant.ownerToken);
    } finally {
      server.resume();
    }
    await lease.release(); // lost: nothing to give back
  });

  it('a safe deadline passed while the process could not run its timers: lease.lost is true at once, the signal aborted', async () => {
    const lease = await kh.acquire(key('frozen'), { ttlMs: 300, autoRenew: false });
    // Block this process past the safe deadline (as a frozen or starved one would be): no timer can run.
    const until = performance.now() + 400;
    while (performance.now() < until) {
      /* busy */
    }
    // Read before any timer has had a turn: the deadline timer has not fired yet.
    expect(lease.remainingMs).toBe(0);
    expect(lease.lost).toBe(true);
    expect(lease.signal.aborted).toBe(true);
    expect((lease.signal.reason as LeaseLostError).reason).toBe('deadline');
  });

  it('withLock whose fn blocked the process past the safe deadline throws LeaseLostError, though no timer ran', async () => {
    const name = key('frozen-with-lock');
    const run = kh.withLock(name, { ttlMs: 300, autoRenew: false }, () => {
      const until = performance.now() + 400;
      while (performance.now() < until) {
        /* busy: no timer can run */
      }
      return 'done';
    });
    await expect(run).rejects.toMatchObject({ name: 'LeaseLostError', reason: 'deadline' });
  });

  it('429: retries after Retry-After (never sooner), then succeeds', async () => {
    const limited = await KeyholderProcess.start({ env: { LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '3', RATE_LIMIT_WINDOW_MS: '2000' } });
    try {
      // Use up the window (until a 429 is seen), then acquire: its first attempt is refused with 429 and
      // retried. Should the window roll over in between on a slow machine, start again.
      let recorder = recordingFetch();
      let retries: RetryEvent[] = [];
      const k = key('429');
      for (let round = 0; round < 5 && retries.length === 0; round++) {
        recorder = recordingFetch();
        retries = [];
        const seen = retries;
        const client = new KeyholderClient({ baseUrl: limited.url, fetch: recorder.fetch, onRetry: (e) => seen.push(e) });
        while ((await fetch(`${limited.url}/v1/locks/${k}`)).status !== 429);
        const grant = await client.acquireGrant(k, { ttlMs: 5_000 });
        expect(grant.key).toBe(k);
        if (retries.length === 0) await client.release(k, grant.ownerToken);
      }
      const first = retries[0];
      expect(first?.error.code).toBe('rate_limited');
      expect(first?.error.retryAfterMs).toBeGreaterThan(0);
      expect(first?.delayMs).toBeGreaterThanOrEqual(first?.error.retryAfterMs ?? Infinity);
      const attempts = recorder.sent.filter((r) => r.path.endsWith('/acquire'));
      expect(attempts[0]?.status).toBe(429);
      expect(attempts.at(-1)?.status).toBe(200);
      // The retry was sent no sooner than Retry-After after the 429 arrived.
      const gapMs = (attempts[1]?.at ?? 0) - (attempts[0]?.answeredAt ?? Infinity);
      expect(gapMs).toBeGreaterThanOrEqual((first?.error.retryAfterMs ?? Infinity) - 1);
    } finally {
      await limited.stop();
    }
  });
});

describe('TypeScript client: 503 retries against a server whose Redis is down', { timeout: 90_000 }, () => {
  let redis: RedisServer;
  let server: KeyholderProcess;

  beforeAll(async () => {
    redis = await RedisServer.start();
    server = await KeyholderProcess.start({ env: { LOG_LEVEL: 'warn', REDIS_URL: redis.url, KEYHOLDER_STORE: 'redis' } });
  });

  afterAll(async () => {
    await server?.stop();
    await redis?.stop();
  });

  it('retries 503 after Retry-After until Redis is back, and gives up at the deadline', async () => {
    await redis.kill();
    // With no time to retry, the 503 is thrown as UnavailableError with its Retry-After.
    const quick = new KeyholderClient({ baseUrl: server.url, retryBudgetMs: 0 });
    const err = await quick.acquireGrant(key('503-quick'), { ttlMs: 5_000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnavailableError);
    expect((err as UnavailableError).status).toBe(503);
    expect((err as UnavailableError).retryAfterMs).toBeGreaterThan(0);

    const recorder = recordingFetch();
    const retries: RetryEvent[] = [];
    let relaunched: Promise<void> | undefined;
    const client = new KeyholderClient({
      baseUrl: server.url,
      fetch: recorder.fetch,
      retryBudgetMs: 60_000,
      onRetry: (e) => {
        retries.push(e);
        relaunched ??= redis.launch(); // Redis comes back while the client waits to retry.
      },
    });
    const lease = await client.acquire(key('503'), { ttlMs: 5_000 });
    await relaunched;
    expect(retries[0]?.error.status).toBe(503);
    const attempts = recorder.sent.filter((r) => r.path.endsWith('/acquire'));
    for (let i = 1; i < attempts.length; i++) {
      const retryAfterMs = retries[i - 1]?.error.retryAfterMs ?? 0;
      expect((attempts[i]?.at ?? 0) - (attempts[i - 1]?.answeredAt ?? Infinity)).toBeGreaterThanOrEqual(retryAfterMs - 1);
    }
    expect(attempts.at(-1)?.status).toBe(200);
    await lease.release();
  });
});
