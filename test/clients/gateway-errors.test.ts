import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { KeyholderClient } from '../../src/client/index.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import { requireTool } from '../helpers/tools.js';

/**
 * Behind a load balancer, a restarting or overloaded instance is answered for by the balancer: 502 Bad
 * Gateway or 504 Gateway Timeout, with the balancer's own HTML page. Like a lost connection, such an
 * answer says nothing about the lease; a renewal that met one is tried again, not taken for a lost lease
 * (the lease is live on the server until its end).
 */
let t: TestApp;
let gateway: Server;
let gatewayUrl = '';
/** Answers the next N renewals itself with this status, as a balancer would. */
let failRenewals: { status: number; left: number } = { status: 502, left: 0 };
let failedRenewals = 0;

beforeAll(async () => {
  t = await buildTestApp({ logLevel: 'warn' });
  const upstream = await t.app.listen({ port: 0, host: '127.0.0.1' });
  gateway = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url?.endsWith('/renew') && failRenewals.left > 0) {
        failRenewals.left -= 1;
        failedRenewals += 1;
        res.writeHead(failRenewals.status, { 'content-type': 'text/html' });
        res.end(`<html><body><h1>${failRenewals.status}</h1></body></html>`);
        return;
      }
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && k !== 'host' && k !== 'connection') headers[k] = v;
      void fetch(`${upstream}${req.url ?? '/'}`, {
        method: req.method,
        headers,
        body: req.method === 'GET' ? undefined : Buffer.concat(chunks),
      }).then(
        async (answer) => {
          const body = Buffer.from(await answer.arrayBuffer());
          const out: Record<string, string> = {};
          answer.headers.forEach((v, k) => {
            if (k !== 'content-length' && k !== 'connection' && k !== 'keep-alive' && k !== 'transfer-encoding') out[k] = v;
          });
          res.writeHead(answer.status, out);
          res.end(body);
        },
        () => {
          res.writeHead(500);
          res.end();
        },
      );
    });
  });
  await new Promise<void>((resolve) => gateway.listen(0, '127.0.0.1', resolve));
  gatewayUrl = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => gateway?.close(resolve));
  await t?.close();
});

for (const status of [502, 504]) {
  it(`a renewal answered ${status} by the balancer is tried again, and the lease is kept`, async () => {
    const client = new KeyholderClient({ baseUrl: gatewayUrl });
    const lease = await client.acquire(`gw-${status}`, { ttlMs: 1_500 });
    failedRenewals = 0;
    failRenewals = { status, left: 1 };
    // The balancer's answer, then at least one renewal through to the server.
    const renewedAfter = (async () => {
      while (failedRenewals === 0 || failRenewals.left > 0) await new Promise((r) => setTimeout(r, 20));
      const held = (await t.app.inject({ method: 'GET', url: `/v1/locks/gw-${status}` })).json<{ expiresAt: string }>();
      const firstEnd = Date.parse(held.expiresAt);
      for (;;) {
        if (lease.lost) return false;
        const now = (await t.app.inject({ method: 'GET', url: `/v1/locks/gw-${status}` })).json<{ expiresAt?: string }>();
        if (now.expiresAt !== undefined && Date.parse(now.expiresAt) > firstEnd) return true;
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    expect(await renewedAfter).toBe(true);
    expect(lease.lost).toBe(false);
    await lease.release();
  });
}

/**
 * The Python client: a lease whose renewal meets the balancer's page stays held. The script holds a
 * 1.5 s lease for 2.5 s (renewals at about a third of the TTL, the first of them answered 502 here) and
 * prints whether it was lost.
 */
const PYTHON = `
import json, sys, time
sys.path.insert(0, sys.argv[2])
import keyholder
lease = keyholder.Client(sys.argv[1], retry_budget_s=5).acquire("gw-python", ttl_ms=1500)
time.sleep(2.5)
lost = lease.lost.is_set()
reason = lease.lost_reason
if not lost:
    lease.release()
print(json.dumps({"lost": lost, "reason": reason}))
`;

it('the Python client tries a renewal answered 502 by the balancer again, and keeps the lease', async () => {
  requireTool('python3', 'python3');
  failedRenewals = 0;
  failRenewals = { status: 502, left: 1 };
  const child = spawn('python3', ['-I', '-c', PYTHON, gatewayUrl, new URL('../../clients/python', import.meta.url).pathname], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  expect(code, err).toBe(0);
  expect(failedRenewals, 'the balancer answered no renewal').toBe(1);
  expect(JSON.parse(out)).toEqual({ lost: false, reason: null });
});
