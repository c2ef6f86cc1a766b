import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { stringify } from 'yaml';
import { type ApiKeyEntry, KeyRing, loadKeysFile, reloadKeyRing } from '../../src/auth/api-keys.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { bearer, makeKeys } from '../helpers/api-keys.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import { threeStores } from '../helpers/three-stores.js';

/**
 * A reload of the keys file that takes a key's right away ends that key's open waits at once: a queued
 * lock, semaphore or read/write lock acquire, a waiting lock set and a blocking query are answered 401
 * or 403 as the same request sent now would be, their places in the queue are withdrawn (the next
 * waiter is not held back, the quota unit is back) and nothing is granted to them. Keys the reload
 * leaves as they were keep waiting. On every store.
 */
/** Leases and waiting acquires one namespace may count at once: a holder's lease and two waiters' units. */
const QUOTA = 3;

/**
 * The keys of one case, in a namespace of its own (so a case's leases and quota units are its own):
 * a holder, the key the reload takes rights from, one it leaves alone, and an operator.
 */
function freshCast() {
  const namespace = `team-${randomUUID().slice(0, 8)}`;
  const keys = makeKeys([
    { id: 'holder-key', namespace, scopes: ['locks'] },
    { id: 'doomed-key', namespace, scopes: ['locks'] },
    { id: 'next-key', namespace, scopes: ['locks'] },
    { id: 'ops-key', namespace: 'ops', scopes: ['admin'] },
  ]);
  const as = (id: string) => bearer(keys.plain[id] ?? '');
  return {
    namespace,
    entries: keys.entries,
    HOLDER: as('holder-key'),
    DOOMED: as('doomed-key'),
    NEXT: as('next-key'),
    ADMIN: as('ops-key'),
  };
}

interface Answer {
  readonly status: number;
  readonly body: Record<string, unknown>;
  readonly headers: Headers;
}

describe.each(threeStores('revoked'))('%s store', (_name, makeStore) => {
  let t: TestApp;
  let base: string;
  let keysFile: string;
  let keyring: KeyRing;
  let callers = new AbortController();
  let c = freshCast();
  const reloads: string[] = [];

  beforeAll(async () => {
    keysFile = join(mkdtempSync(join(tmpdir(), 'keyholder-keys-')), 'keys.yaml');
    writeFileSync(keysFile, stringify({ keys: c.entries }));
    keyring = new KeyRing(loadKeysFile(keysFile));
    t = await buildTestApp({
      store: await makeStore(),
      auth: { mode: 'keys', keyring },
      limits: { ...DEFAULT_LIMITS, maxWaitMs: 30_000, maxHeldLocksPerNamespace: QUOTA },
    });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  }, 30_000);
  afterAll(async () => {
    callers.abort();
    await t?.close();
  });
  // Every case starts with keys of its own and an empty waiting room.
  beforeEach(() => {
    c = freshCast();
    reload(c.entries);
  });
  afterEach(async () => {
    callers.abort();
    callers = new AbortController();
    await vi.waitFor(() => expect(t.locks.waitingCallers).toBe(0), { timeout: 10_000, interval: 10 });
  });

  /** Writes `entries` to the keys file and reloads it, as SIGHUP does. */
  function reload(entries: readonly ApiKeyEntry[]): void {
    writeFileSync(keysFile, stringify({ keys: entries }));
    const ok = reloadKeyRing(keyring, keysFile, { info: (_o, msg) => reloads.push(msg), error: (_o, msg) => reloads.push(msg) });
    expect(ok, reloads.at(-1)).toBe(true);
  }

  /** The keys file with doomed-key changed by `change` (or left out, when it returns null). */
  function withDoomed(change: (entry: ApiKeyEntry) => ApiKeyEntry | null): ApiKeyEntry[] {
    return c.entries.flatMap((entry) => {
      if (entry.id !== 'doomed-key') return [entry];
      const changed = change(entry);
      return changed === null ? [] : [changed];
    });
  }

  async function call(method: 'GET' | 'POST', path: string, headers: Record<string, string>, body?: unknown): Promise<Answer> {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: callers.signal,
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {}, headers: res.headers };
  }

  /** A call that is still open, and its answer once it came. */
  function started(answer: Promise<Answer>): { answer: Promise<Answer>; settled: () => Answer | undefined } {
    let got: Answer | undefined;
    void answer.then((a) => (got = a)).catch(() => undefined);
    return { answer, settled: () => got };
  }

  /** The answer of `wait`, which must come within a few seconds of the reload, while its key is still busy. */
  async function answeredAtOnce(wait: { settled: () => Answer | undefined }): Promise<Answer> {
    await vi.waitFor(() => expect(wait.settled(), 'still waiting after the reload').toBeDefined(), { timeout: 5_000, interval: 10 });
    return wait.settled() as Answer;
  }

  /** The holder labels queued on `key` (an admin's view), head first. */
  async function queued(primitive: 'locks' | 'semaphores' | 'rwlocks', key: string): Promise<unknown[]> {
    const answer = await call('GET', `/v1/queue/${primitive}/${key}?namespace=${c.namespace}`, c.ADMIN);
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    return (answer.body.queue as Array<{ holder: unknown }>).map((q) => q.holder);
  }

  async function until(check: () => Promise<void>): Promise<void> {
    await vi.waitFor(check, { timeout: 10_000, interval: 20 });
  }

  function expectRefused(answer: Answer, status: 401 | 403): void {
    expect(answer.status, JSON.stringify(answer.body)).toBe(status);
    expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(answer.body).toMatchObject({ status, code: status === 401 ? 'unauthenticated' : 'forbidden' });
    if (status === 401) expect(answer.headers.get('www-authenticate')).toBe('Bearer realm="keyholder", error="invalid_token"');
  }

  it('a revoked key queued for a lock is answered 401 at once; its place and quota unit are gone, the next waiter gets the lock', async () => {
    const key = `lock-${randomUUID()}`;
    const held = await call('POST', `/v1/locks/${key}/acquire`, c.HOLDER, { ttlMs: 20_000 });
    expect(held.status).toBe(200);
    const doomed = started(call('POST', `/v1/locks/${key}/acquire`, c.DOOMED, { ttlMs: 20_000, waitMs: 20_000, holder: 'doomed' }));
    await until(async () => expect(await queued('locks', key)).toEqual(['doomed']));
    const next = started(call('POST', `/v1/locks/${key}/acquire`, c.NEXT, { ttlMs: 20_000, waitMs: 20_000, holder: 'next' }));
    await until(async () => expect(await queued('locks', key)).toEqual(['doomed', 'next']));
    // The namespace's quota is full: the holder's lease and both waiters' units.
    expect((await call('POST', `/v1/locks/other-${key}/acquire`, c.HOLDER, { ttlMs: 1_000 })).body).toMatchObject({
      code: 'quota_exceeded',
    });

    reload(withDoomed(() => null));

    expectRefused(await answeredAtOnce(doomed), 401);
    expect(await queued('locks', key)).toEqual(['next']);
    // Its quota unit is back: one more lease fits in the namespace.
    const other = await call('POST', `/v1/locks/other-${key}/acquire`, c.HOLDER, { ttlMs: 1_000 });
    expect(other.status, JSON.stringify(other.body)).toBe(200);
    expect(next.settled()).toBeUndefined();

    expect((await call('POST', `/v1/locks/${key}/release`, c.HOLDER, { ownerToken: held.body.ownerToken })).status).toBe(200);
    const granted = await next.answer;
    expect(granted.status).toBe(200);
    expect(granted.body.fencingToken).toBeGreaterThan(Number(held.body.fencingToken));
    await call('POST', `/v1/locks/${key}/release`, c.NEXT, { ownerToken: granted.body.ownerToken });
    await call('POST', `/v1/locks/other-${key}/release`, c.HOLDER, { ownerToken: other.body.ownerToken });
  });

  it('a holder that releases right after the reload hands the lock to the next waiter, never to the revoked one', async () => {
    const key = `race-${randomUUID()}`;
    const held = await call('POST', `/v1/locks/${key}/acquire`, c.HOLDER, { ttlMs: 20_000 });
    const doomed = started(call('POST', `/v1/locks/${key}/acquire`, c.DOOMED, { ttlMs: 20_000, waitMs: 20_000, holder: 'doomed' }));
    await until(async () => expect(await queued('locks', key)).toEqual(['doomed']));
    const next = started(call('POST', `/v1/locks/${key}/acquire`, c.NEXT, { ttlMs: 20_000, waitMs: 20_000, holder: 'next' }));
    await until(async () => expect(await queued('locks', key)).toEqual(['doomed', 'next']));

    reload(withDoomed(() => null));
    expect((await call('POST', `/v1/locks/${key}/release`, c.HOLDER, { ownerToken: held.body.ownerToken })).status).toBe(200);

    expectRefused(await doomed.answer, 401);
    const granted = await next.answer;
    expect(granted.status).toBe(200);
    expect((await call('GET', `/v1/locks/${key}`, c.NEXT)).body).toMatchObject({
      held: true,
      holder: 'next',
      fencingToken: granted.body.fencingToken,
    });
    await call('POST', `/v1/locks/${key}/release`, c.NEXT, { ownerToken: granted.body.ownerToken });
  });

  it('a key that loses the locks scope: its queued semaphore acquire is answered 403 at once, and nothing is handed to it', async () => {
    const sem = `sem-${randomUUID()}`;
    const held = await call('POST', `/v1/semaphores/${sem}/acquire`, c.HOLDER, { limit: 1, ttlMs: 20_000 });
    expect(held.status).toBe(200);
    const wait = started(
      call('POST', `/v1/semaphores/${sem}/acquire`, c.DOOMED, { limit: 1, ttlMs: 20_000, waitMs: 20_000, holder: 'doomed' }),
    );
    await until(async () => expect(await queued('semaphores', sem)).toEqual(['doomed']));

    reload(withDoomed((entry) => ({ ...entry, scopes: ['admin'] })));

    const answer = await answeredAtOnce(wait);
    expectRefused(answer, 403);
    expect(String(answer.body.detail)).toMatch(/"locks" scope/);
    expect(await queued('semaphores', sem)).toEqual([]);
    expect((await call('POST', `/v1/semaphores/${sem}/release`, c.HOLDER, { ownerToken: held.body.ownerToken })).status).toBe(200);
    expect((await call('GET', `/v1/semaphores/${sem}`, c.HOLDER)).body).toMatchObject({ permitsHeld: 0 });
  });

  it('a key moved to another namespace: its queued read/write lock acquire is answered 403 at once, and nothing is handed to it', async () => {
    const rw = `rw-${randomUUID()}`;
    const held = await call('POST', `/v1/rwlocks/${rw}/acquire`, c.HOLDER, { mode: 'write', ttlMs: 20_000 });
    expect(held.status).toBe(200);
    const wait = started(
      call('POST', `/v1/rwlocks/${rw}/acquire`, c.DOOMED, { mode: 'read', ttlMs: 20_000, waitMs: 20_000, holder: 'doomed' }),
    );
    await until(async () => expect(await queued('rwlocks', rw)).toEqual(['doomed']));

    reload(withDoomed((entry) => ({ ...entry, namespace: 'team-z' })));

    const answer = await answeredAtOnce(wait);
    expectRefused(answer, 403);
    expect(String(answer.body.detail)).toMatch(/namespace/);
    expect(await queued('rwlocks', rw)).toEqual([]);
    expect((await call('POST', `/v1/rwlocks/${rw}/release`, c.HOLDER, { ownerToken: held.body.ownerToken })).status).toBe(200);
    expect((await call('GET', `/v1/rwlocks/${rw}`, c.HOLDER)).body).toMatchObject({ holderCount: 0 });
  });

  it("a revoked key's waiting lock set and blocking query are answered 401 at once, the set's quota units are back; an untouched key keeps watching", async () => {
    const key = `set-${randomUUID()}`;
    const held = await call('POST', `/v1/locks/${key}/acquire`, c.HOLDER, { ttlMs: 20_000 });
    expect(held.status).toBe(200);
    const { index } = (await call('GET', `/v1/locks/${key}`, c.DOOMED)).body as { index: number };
    const set = started(call('POST', '/v1/lock-sets/acquire', c.DOOMED, { keys: [key, `free-${key}`], ttlMs: 20_000, waitMs: 20_000 }));
    const watch = started(call('GET', `/v1/locks/${key}?index=${index}&waitMs=20000`, c.DOOMED));
    const kept = started(call('GET', `/v1/locks/${key}?index=${index}&waitMs=20000`, c.NEXT));
    await until(async () => expect(t.locks.waitingCallers).toBe(3));
    // The namespace's quota is full: the held lock and the waiting set's two units.
    expect((await call('POST', `/v1/locks/other-${key}/acquire`, c.HOLDER, { ttlMs: 1_000 })).body).toMatchObject({
      code: 'quota_exceeded',
    });

    reload(withDoomed(() => null));

    for (const wait of [set, watch]) expectRefused(await answeredAtOnce(wait), 401);
    const other = await call('POST', `/v1/locks/other-${key}/acquire`, c.HOLDER, { ttlMs: 1_000 });
    expect(other.status, JSON.stringify(other.body)).toBe(200);
    expect(kept.settled()).toBeUndefined();
    expect((await call('POST', `/v1/locks/${key}/release`, c.HOLDER, { ownerToken: held.body.ownerToken })).status).toBe(200);
    expect((await kept.answer).body).toMatchObject({ key, held: false });
    // The set took nothing: its free key is free.
    expect((await call('GET', `/v1/locks/free-${key}`, c.HOLDER)).body).toMatchObject({ held: false });
  });
});
