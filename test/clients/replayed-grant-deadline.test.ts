import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyholderClient } from '../../src/client/index.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const PY_DIR = fileURLToPath(new URL('../../clients/python', import.meta.url));

/**
 * The documented use of a caller's own Idempotency-Key: "pass your own to retry across processes" /
 * "Retry with the same key to get it". The retry is answered with the EARLIER lease (same ownerToken,
 * same expiresAt: the server's end of it is the first attempt's decision + TTL), but the Lease measures
 * its safe deadline from the retry's own send time, i.e. up to a whole TTL too late.
 */
describe('a grant replayed for a caller-supplied Idempotency-Key', { timeout: 30_000 }, () => {
  let server: TestApp;
  let baseUrl = '';
  beforeAll(async () => {
    server = await buildTestApp({ logLevel: 'warn' });
    baseUrl = await server.app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => server?.close());

  it('TS: lease.signal is aborted before another caller can be granted the lock', async () => {
    const kh = new KeyholderClient({ baseUrl });
    const k = `replay-${randomUUID()}`;
    const ttlMs = 3_000;
    const idempotencyKey = randomUUID();
    // Attempt 1 (another process, or an earlier acquire() whose answer was lost / gave up on a 503 "kept").
    await kh.acquireGrant(k, { ttlMs, idempotencyKey });
    await sleep(2_600);
    // The retry: the server replays the 2.6 s old lease; the client believes it has a fresh 3 s.
    // (autoRenew off only to make the timing exact: the signal must still abort at the safe deadline. With
    // renewals on, the first one is due ~1 s after the replay, i.e. after the server's end: same failure.)
    const lease = await kh.acquire(k, { ttlMs, idempotencyKey, autoRenew: false });
    // Wait for the server's lease to end, then another caller takes the lock.
    while ((await kh.inspect(k)).held) await sleep(20);
    const other = await kh.acquireGrant(k, { ttlMs });
    expect(other.ownerToken).not.toBe(lease.ownerToken);
    // Safety promise: the signal must have aborted before the lease could end on the server.
    expect(lease.signal.aborted, 'another caller holds the lock while lease.signal is not aborted').toBe(true);
  });

  it('Python: the safe deadline is not after the server end of the lease', async () => {
    // A 10 s lease replayed 2.6 s on: a client that counted the TTL from the replay would believe in
    // 10 s against the server's 7.4, and the lease is still live for the inspect and release on a busy
    // machine (with 3 s it could run out first, and the release then raises).
    const script = `
import sys, time, uuid, json
sys.path.insert(0, ${JSON.stringify(PY_DIR)})
import keyholder
c = keyholder.Client(${JSON.stringify(baseUrl)})
key, ik = "py-replay-" + str(uuid.uuid4()), str(uuid.uuid4())
c.acquire_grant(key, 10000, idempotency_key=ik)
time.sleep(2.6)
lease = c.acquire(key, 10000, idempotency_key=ik)
before = time.monotonic()
believed_ms = lease.remaining_s * 1000
server_ms = c.inspect(key)["ttlRemainingMs"]
rtt_ms = (time.monotonic() - before) * 1000
lease.release()
print(json.dumps({"believed_ms": believed_ms, "server_ms": server_ms, "rtt_ms": rtt_ms}))
`;
    // Async: the server runs in this process, so a sync spawn would block it.
    const run = await promisify(execFile)('python3', ['-I', '-c', script], { encoding: 'utf8', timeout: 20_000 });
    expect(run.stderr).toBe('');
    const out = JSON.parse(run.stdout) as { believed_ms: number; server_ms: number; rtt_ms: number };
    // safe deadline <= server's end  <=>  believed remaining <= server's remaining + the inspect's round trip
    expect(out.believed_ms, JSON.stringify(out)).toBeLessThanOrEqual(out.server_ms + out.rtt_ms);
  });
});
