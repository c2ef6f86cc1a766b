import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyholderClient } from '../../src/client/index.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

const PY_DIR = fileURLToPath(new URL('../../clients/python', import.meta.url));

/**
 * A waiting acquire granted after longer than its TTL (the holder before it let go late): the grant's own
 * safe window, counted from the acquire's send, has passed before the caller has the lease. Nothing ran
 * under it yet, so the client renews it and counts the window from that renewal. Before, the lease was
 * lost at once (acquire threw), and the lock stayed held by nobody until its TTL. (Go:
 * TestAWaitLongerThanTheTTLStillGivesALease.)
 */
describe('a waiting acquire granted after longer than its TTL', { timeout: 30_000 }, () => {
  let server: TestApp;
  let baseUrl = '';
  beforeAll(async () => {
    server = await buildTestApp({ logLevel: 'warn' });
    baseUrl = await server.app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => server?.close());

  it('TS: acquire hands out a live lease, and its release frees the lock', async () => {
    const kh = new KeyholderClient({ baseUrl });
    const k = `long-wait-${randomUUID()}`;
    const first = await kh.acquireGrant(k, { ttlMs: 10_000 });
    const letGo = new Promise((r) => setTimeout(r, 1_500)).then(() => kh.release(k, first.ownerToken));
    const lease = await kh.acquire(k, { ttlMs: 1_000, waitMs: 5_000 });
    await letGo;
    expect(lease.lost).toBe(false);
    expect(lease.remainingMs).toBeGreaterThan(0);
    await lease.release();
    expect((await kh.inspect(k)).held).toBe(false);
  });

  it('Python: acquire hands out a live lease, and its release frees the lock', async () => {
    const script = `
import sys, threading, time, uuid, json
sys.path.insert(0, ${JSON.stringify(PY_DIR)})
import keyholder
c = keyholder.Client(${JSON.stringify(baseUrl)})
key = "py-long-wait-" + str(uuid.uuid4())
first = c.acquire_grant(key, 10000)
threading.Timer(1.5, lambda: c.release(key, first["ownerToken"])).start()
try:
    lease = c.acquire(key, 1000, wait_ms=5000)
except keyholder.LeaseLostError as err:
    print(json.dumps({"error": str(err), "held": c.inspect(key)["held"]}))
    sys.exit(0)
out = {"lost": lease.lost.is_set(), "remaining_s": lease.remaining_s}
lease.release()
out["held_after_release"] = c.inspect(key)["held"]
print(json.dumps(out))
`;
    // Async: the server runs in this process, so a sync spawn would block it.
    const run = await promisify(execFile)('python3', ['-I', '-c', script], { encoding: 'utf8', timeout: 20_000 });
    expect(run.stderr).toBe('');
    const out = JSON.parse(run.stdout) as Record<string, unknown>;
    expect(out.error, JSON.stringify(out)).toBeUndefined();
    expect(out).toMatchObject({ lost: false, held_after_release: false });
    expect(out.remaining_s as number).toBeGreaterThan(0);
  });
});
