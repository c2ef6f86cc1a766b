import { execFile, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyholderClient } from '../../src/client/index.js';
import { KeyholderProcess } from '../helpers/keyholder-process.js';
import { requireTool } from '../helpers/tools.js';

const PY_DIR = fileURLToPath(new URL('../../clients/python', import.meta.url));

/** Runs a Python snippet (keyholder importable) and returns its last stdout line as JSON, and its stderr. */
async function runPython(script: string, timeout = 30_000): Promise<{ out: Record<string, unknown>; stderr: string }> {
  const prelude = `import sys, json, time, uuid\nsys.path.insert(0, ${JSON.stringify(PY_DIR)})\nimport keyholder\n`;
  const run = await promisify(execFile)('python3', ['-I', '-c', prelude + script], { encoding: 'utf8', timeout });
  const lines = run.stdout.trim().split('\n');
  return { out: JSON.parse(lines[lines.length - 1] ?? '{}') as Record<string, unknown>, stderr: run.stderr };
}

const grantFor = (key: string, ttlMs: number) => ({
  key,
  ownerToken: 'owner-token-0000000001',
  fencingToken: 7,
  ttlMs,
  expiresAt: new Date(Date.now() + ttlMs).toISOString(),
  holder: null,
});

/**
 * A stand-in server whose behaviour is chosen by the first path segment (`/<behaviour>-<id>/v1/...`), so
 * each case has its own request counters. Answers like keyholder except where the behaviour says.
 */
describe('Python client: transport faults a keyholder answer can meet', { timeout: 60_000 }, () => {
  let server: Server;
  let base = '';
  const seen = new Map<string, number[]>(); // prefix -> times (ms, Date.now) each request arrived

  beforeAll(async () => {
    requireTool('python3', 'python3');
    server = createServer((req: IncomingMessage, res: ServerResponse) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString('utf8')));
      req.on('end', () => {
        const [, prefix = '', ...rest] = (req.url ?? '').split('/');
        const path = `/${rest.join('/')}`;
        const op = path.endsWith('/acquire') ? 'acquire' : path.endsWith('/renew') ? 'renew' : 'release';
        const count = `${prefix}:${op}`;
        const times = seen.get(count) ?? [];
        times.push(Date.now());
        seen.set(count, times);
        const asked = body ? (JSON.parse(body) as { ttlMs?: number }) : {};
        const answer =
          op === 'acquire'
            ? grantFor('k', asked.ttlMs ?? 1000)
            : op === 'renew'
              ? { key: 'k', fencingToken: 7, ttlMs: asked.ttlMs, expiresAt: new Date(Date.now() + (asked.ttlMs ?? 0)).toISOString() }
              : { key: 'k', released: true };
        const raw = JSON.stringify(answer);
        const behaviour = prefix.replace(/-[^-]+$/, '');
        if (
          (behaviour === 'cut-acquire' && op === 'acquire' && times.length === 1) ||
          (behaviour === 'cut-renew' && op === 'renew' && times.length === 1)
        ) {
          // The answer cut short: the headers and half the body, then the connection is gone.
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(raw.length) });
          res.write(raw.slice(0, raw.length >> 1), () => res.socket?.destroy());
          return;
        }
        if (behaviour === 'cut-error' && op === 'acquire' && times.length === 1) {
          // A 503 problem whose body is cut short.
          const problem = JSON.stringify({ type: 'urn:keyholder:problem:store_unavailable', code: 'store_unavailable', status: 503 });
          res.writeHead(503, { 'content-type': 'application/problem+json', 'content-length': String(problem.length) });
          res.write(problem.slice(0, 20), () => res.socket?.destroy());
          return;
        }
        if (behaviour === 'date' && op === 'acquire' && times.length === 1) {
          // A proxy's 503 with Retry-After as an HTTP date (RFC 9110 allows either form), 3 s ahead.
          const at = new Date(Math.ceil(Date.now() / 1000) * 1000 + 3000).toUTCString();
          res.writeHead(503, { 'content-type': 'text/plain', 'retry-after': at }).end('upstream unavailable');
          return;
        }
        if (behaviour === 'release-500-slow-renew' && op === 'renew') {
          // A renewal answered late (0.8 s), with a server error (not retried).
          const problem = JSON.stringify({ type: 'urn:keyholder:problem:internal_error', code: 'internal_error', status: 500 });
          setTimeout(() => res.writeHead(500, { 'content-type': 'application/problem+json' }).end(problem), 800);
          return;
        }
        if (behaviour.startsWith('release-500') && op === 'release' && times.length === 1) {
          // The first release meets a server error (not retried); the next one is answered.
          const problem = JSON.stringify({ type: 'urn:keyholder:problem:internal_error', code: 'internal_error', status: 500 });
          res.writeHead(500, { 'content-type': 'application/problem+json' }).end(problem);
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end(raw);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => new Promise((resolve) => server.close(resolve)));

  it('TS (reference): an acquire whose answer was cut short is retried and gets the grant', async () => {
    const kh = new KeyholderClient({ baseUrl: `${base}/cut-acquire-ts` });
    await expect(kh.acquireGrant('k', { ttlMs: 5_000 })).resolves.toMatchObject({ key: 'k' });
    expect(seen.get('cut-acquire-ts:acquire')).toHaveLength(2);
  });

  it('Python: an acquire whose answer was cut short is retried (no answer, as for a reset), not raised as http.client.IncompleteRead', async () => {
    const { out } = await runPython(`
c = keyholder.Client(${JSON.stringify(`${base}/cut-acquire-py`)})
try:
    out = {"key": c.acquire_grant("k", 5000)["key"]}
except Exception as err:
    out = {"error": type(err).__module__ + "." + type(err).__name__}
print(json.dumps(out))
`);
    expect(out).toEqual({ key: 'k' });
    expect(seen.get('cut-acquire-py:acquire')).toHaveLength(2);
  });

  it('Python: an error answer (503) whose body was cut short is retried, not raised as http.client.IncompleteRead', async () => {
    const { out } = await runPython(`
c = keyholder.Client(${JSON.stringify(`${base}/cut-error-py`)})
try:
    out = {"key": c.acquire_grant("k", 5000)["key"]}
except Exception as err:
    out = {"error": type(err).__module__ + "." + type(err).__name__}
print(json.dumps(out))
`);
    expect(out).toEqual({ key: 'k' });
    expect(seen.get('cut-error-py:acquire')).toHaveLength(2);
  });

  it('Python: a renewal whose answer was cut short is retried; the renew thread does not die and the lease is kept', async () => {
    const { out, stderr } = await runPython(`
c = keyholder.Client(${JSON.stringify(`${base}/cut-renew-py`)})
lease = c.acquire("k", ttl_ms=3000)
time.sleep(4.5)  # the first renewal (about 1 s in) is cut short; a retry fits well before the 2.9 s deadline
print(json.dumps({"lost": lease.lost.is_set(), "reason": lease.lost_reason}))
`);
    expect(stderr, 'the renew thread died with an uncaught exception').not.toMatch(/Exception in thread/);
    expect(out).toEqual({ lost: false, reason: null });
    expect((seen.get('cut-renew-py:renew') ?? []).length).toBeGreaterThanOrEqual(3);
  });

  it('Python: release() after a release that raised sends the release again (as the TS and Go clients do); once one succeeded, nothing', async () => {
    const { out } = await runPython(`
c = keyholder.Client(${JSON.stringify(`${base}/release-500-py`)})
lease = c.acquire("k", ttl_ms=10000)
try:
    lease.release()
    first = "released"
except keyholder.KeyholderError as err:
    first = err.code
lease.release()
lease.release()
print(json.dumps({"first": first, "lost": lease.lost.is_set()}))
`);
    expect(out).toEqual({ first: 'internal_error', lost: false });
    expect(seen.get('release-500-py:release')).toHaveLength(2);
  });

  it('Python: a lease whose release raised is no longer renewed but still watched: lost at its safe deadline; a release after that sends nothing', async () => {
    const { out } = await runPython(`
c = keyholder.Client(${JSON.stringify(`${base}/release-500-pylost`)})
lease = c.acquire("k", ttl_ms=600)
try:
    lease.release()
    first = "released"
except keyholder.KeyholderError as err:
    first = err.code
lost = lease.lost.wait(5)  # the timer, not is_set()'s own check of the deadline
lease.release()
print(json.dumps({"first": first, "lost": lost, "reason": lease.lost_reason}))
`);
    expect(out).toEqual({ first: 'internal_error', lost: true, reason: 'deadline' });
    expect(seen.get('release-500-pylost:release')).toHaveLength(1);
  });

  it('Python: a renewal sent before a release that raised, and answered after it, is no loss of its own: the lease is lost at its deadline', async () => {
    const { out } = await runPython(`
c = keyholder.Client(${JSON.stringify(`${base}/release-500-slow-renew-py`)})
lease = c.acquire("k", ttl_ms=3000)
time.sleep(1.3)  # the first renewal (about 1 s in) is answered only about 1.8 s in
try:
    lease.release()
except keyholder.KeyholderError:
    pass
time.sleep(1.0)  # the renewal's answer has come (a server error), the 2.9 s safe deadline not yet
early = lease.lost_reason
lease.lost.wait(5)
print(json.dumps({"early": early, "reason": lease.lost_reason}))
`);
    expect(out).toEqual({ early: null, reason: 'deadline' });
    expect(seen.get('release-500-slow-renew-py:renew')).toHaveLength(1);
  });

  it('Python: a with block that went on past the safe deadline after its release raised ends in LeaseLostError', async () => {
    const { out } = await runPython(`
c = keyholder.Client(${JSON.stringify(`${base}/release-500-pywith`)})
try:
    with c.lock("k", ttl_ms=600) as lease:
        try:
            lease.release()
        except keyholder.KeyholderError:
            pass
        time.sleep(1.0)  # past the 600 ms TTL: unlocked by now
    out = {"raised": None}
except keyholder.LeaseLostError as err:
    out = {"raised": err.reason}
print(json.dumps(out))
`);
    expect(out).toEqual({ raised: 'deadline' });
    expect(seen.get('release-500-pywith:release')).toHaveLength(1);
  });

  it('TS (reference): Retry-After as an HTTP date is honoured', async () => {
    const kh = new KeyholderClient({ baseUrl: `${base}/date-ts` });
    await expect(kh.acquireGrant('k', { ttlMs: 5_000 })).resolves.toMatchObject({ key: 'k' });
    const [first = 0, second = 0] = seen.get('date-ts:acquire') ?? [];
    expect(second - first).toBeGreaterThanOrEqual(1_500);
  });

  it('Python: Retry-After as an HTTP date is honoured (the retry is not sent before it)', async () => {
    const { out } = await runPython(`
c = keyholder.Client(${JSON.stringify(`${base}/date-py`)})
print(json.dumps({"key": c.acquire_grant("k", 5000)["key"]}))
`);
    expect(out).toEqual({ key: 'k' });
    const [first = 0, second = 0] = seen.get('date-py:acquire') ?? [];
    expect(second - first, 'ms between the 503 and the retry').toBeGreaterThanOrEqual(1_500);
  });
});

/** Against a real keyholder server. */
describe('Python client against a running server: dates and deadlines', { timeout: 60_000 }, () => {
  let server: KeyholderProcess;

  beforeAll(async () => {
    requireTool('python3', 'python3');
    server = await KeyholderProcess.start({ env: { LOG_LEVEL: 'warn', HISTORY: 'on' } });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('history(since=<datetime>) as the docstring allows: the events, not 400 invalid_request', async () => {
    const key = `py-history-${randomUUID()}`;
    const { out } = await runPython(`
from datetime import datetime, timedelta, timezone
c = keyholder.Client(${JSON.stringify(server.url)})
since = datetime.now(timezone.utc) - timedelta(minutes=1)
c.acquire(${JSON.stringify(key)}, ttl_ms=5000).release()
time.sleep(1.5)  # history is flushed in batches
out = {}
for name, value in [("aware", since), ("string", since.strftime("%Y-%m-%dT%H:%M:%SZ"))]:
    try:
        out[name] = [e["type"] for e in c.history(${JSON.stringify(key)}, since=value)["events"]]
    except keyholder.KeyholderError as err:
        out[name] = err.code
print(json.dumps(out))
`);
    expect(out.string).toEqual(['granted', 'released']);
    expect(out.aware).toEqual(['granted', 'released']);
  });

  it('lease.lost counts a safe deadline already passed (as the docs say), before its timer thread has run', async () => {
    const key = `py-frozen-${randomUUID()}`;
    // As test/clients/python/lock_flow.py simulates a process frozen past its deadline: the timer has not run.
    const { out } = await runPython(`
c = keyholder.Client(${JSON.stringify(server.url)})
lease = c.acquire(${JSON.stringify(key)}, ttl_ms=60000)
lease._deadline_timer.cancel()
lease._deadline = time.monotonic() - 0.001
print(json.dumps({"lost": lease.lost.is_set(), "remaining_s": lease.remaining_s}))
`);
    expect(out).toEqual({ lost: true, remaining_s: 0 });
  });

  it('a real freeze (SIGSTOP) past the safe deadline: the caller never sees lost unset after its deadline', async () => {
    const key = `py-sigstop-${randomUUID()}`;
    // The worker checks lease.lost before each step, as the module doc tells it to, and counts the steps it
    // would have taken with the lease's safe deadline already passed.
    const script = `import sys, json, time
sys.path.insert(0, ${JSON.stringify(PY_DIR)})
import keyholder
c = keyholder.Client(${JSON.stringify(server.url)})
lease = c.acquire(${JSON.stringify(key)}, ttl_ms=1000)
print("ready", flush=True)
unlocked_steps = 0
end = time.monotonic() + 5
while time.monotonic() < end:
    if lease.lost.is_set():
        break
    if time.monotonic() >= lease._deadline:   # the step runs now, with the lease already past its deadline
        unlocked_steps += 1
print(json.dumps({"unlocked_steps": unlocked_steps, "lost": lease.lost.is_set(), "reason": lease.lost_reason}), flush=True)
`;
    const child = spawn('python3', ['-I', '-c', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    await new Promise<void>((resolve) =>
      child.stdout.on('data', (c: Buffer) => {
        stdout += c.toString('utf8');
        if (stdout.includes('ready')) resolve();
      }),
    );
    await new Promise((r) => setTimeout(r, 200));
    child.kill('SIGSTOP');
    await new Promise((r) => setTimeout(r, 2_000));
    child.kill('SIGCONT');
    await new Promise((resolve) => child.once('close', resolve));
    expect(stderr).toBe('');
    const out = JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as Record<string, unknown>;
    expect(out).toMatchObject({ lost: true, reason: 'deadline' });
    // At most the one step the freeze may have caught between its check and itself (no check can close that
    // window; the fencing token does). Before, every step until the timer thread got the GIL: thousands.
    expect(out.unlocked_steps, JSON.stringify(out)).toBeLessThanOrEqual(1);
  });
});
