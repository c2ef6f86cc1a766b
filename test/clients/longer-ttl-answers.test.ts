import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidResponseError, KeyholderClient } from '../../src/client/index.js';

const PY_DIR = fileURLToPath(new URL('../../clients/python', import.meta.url));

/**
 * A server answering a grant or renewal with a TTL longer than asked (an hour for 1 s) is no keyholder:
 * it grants exactly the TTL asked, or refuses. Trusted, a lease counted its safe deadline from the hour
 * and asked its renewals for an hour. Both clients refuse such an answer (Go:
 * TestATTLLongerThanAskedIsABadResponse).
 */
describe('an answer with a TTL longer than asked', { timeout: 30_000 }, () => {
  let server: Server;
  let baseUrl = '';
  beforeAll(async () => {
    server = createServer((req, res) => {
      const answer = req.url?.endsWith('/acquire')
        ? {
            key: 'k',
            ownerToken: 'owner-token-0000000001',
            fencingToken: 7,
            ttlMs: 3_600_000,
            expiresAt: '2026-11-30T11:00:00.000Z',
            holder: null,
          }
        : req.url?.endsWith('/renew')
          ? { key: 'k', fencingToken: 7, ttlMs: 3_600_000, expiresAt: '2026-11-30T11:00:00.000Z' }
          : { key: 'k', released: true };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => new Promise((resolve) => server.close(resolve)));

  it('TS: acquire and renew are refused as invalid responses', async () => {
    const kh = new KeyholderClient({ baseUrl, retryBudgetMs: 0 });
    await expect(kh.acquire('k', { ttlMs: 1_000 })).rejects.toBeInstanceOf(InvalidResponseError);
    await expect(kh.acquireGrant('k', { ttlMs: 1_000 })).rejects.toBeInstanceOf(InvalidResponseError);
    await expect(kh.renew('k', 'owner-token-0000000001', 1_000)).rejects.toBeInstanceOf(InvalidResponseError);
  });

  it('TS: a grant of another key than the one asked is refused; of the key asked, taken', async () => {
    const kh = new KeyholderClient({ baseUrl, retryBudgetMs: 0 });
    await expect(kh.acquireGrant('x', { ttlMs: 3_600_000 })).rejects.toBeInstanceOf(InvalidResponseError);
    await expect(kh.acquireGrant('k', { ttlMs: 3_600_000 })).resolves.toMatchObject({ key: 'k' });
  });

  it('Python: a grant of another key than the one asked is refused; of the key asked, taken', async () => {
    const script = `
import sys, json
sys.path.insert(0, ${JSON.stringify(PY_DIR)})
import keyholder
c = keyholder.Client(${JSON.stringify(baseUrl)}, retry_budget_s=0)
out = {}
for name, key in [("other", "x"), ("asked", "k")]:
    try:
        out[name] = c.acquire_grant(key, 3600000)["key"]
    except keyholder.InvalidResponseError:
        out[name] = "refused"
print(json.dumps(out))
`;
    const run = await promisify(execFile)('python3', ['-I', '-c', script], { encoding: 'utf8', timeout: 20_000 });
    expect(run.stderr).toBe('');
    expect(JSON.parse(run.stdout)).toEqual({ other: 'refused', asked: 'k' });
  });

  it('Python: acquire and renew are refused as invalid responses', async () => {
    const script = `
import sys, json
sys.path.insert(0, ${JSON.stringify(PY_DIR)})
import keyholder
c = keyholder.Client(${JSON.stringify(baseUrl)}, retry_budget_s=0)
out = {}
for name, call in [
    ("acquire", lambda: c.acquire_grant("k", 1000)),
    ("renew", lambda: c.renew("k", "owner-token-0000000001", 1000)),
]:
    try:
        call()
        out[name] = "accepted"
    except keyholder.InvalidResponseError:
        out[name] = "refused"
print(json.dumps(out))
`;
    const run = await promisify(execFile)('python3', ['-I', '-c', script], { encoding: 'utf8', timeout: 20_000 });
    expect(run.stderr).toBe('');
    expect(JSON.parse(run.stdout)).toEqual({ acquire: 'refused', renew: 'refused' });
  });
});
