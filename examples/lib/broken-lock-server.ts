import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A deliberately broken lock service for the examples' tests: it speaks keyholder's acquire, renew,
 * release and inspect API, but grants every acquire, held or not (with increasing fencing tokens, as
 * keyholder's are), renews every lease it granted and says every lock is free. An example that still
 * shows no harm when run against it does not demonstrate what the lock prevents.
 */
export interface BrokenLock {
  readonly url: string;
  /** Acquires answered, all granted. */
  grants(): number;
  stop(): Promise<void>;
}

const ROUTE = /^\/v1\/locks\/([^/?]+)(?:\/(acquire|renew|release))?(?:\?.*)?$/;

export async function startBrokenLock(): Promise<BrokenLock> {
  const tokens = new Map<string, number>();
  /** Owner token → the fencing token of its grant. */
  const owners = new Map<string, number>();
  let grants = 0;
  let index = 0;
  const server = createServer((request, response) => {
    let raw = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (raw += chunk));
    request.on('end', () => {
      const send = (status: number, body: unknown, type = 'application/json') => {
        response.writeHead(status, { 'content-type': type });
        response.end(JSON.stringify(body));
      };
      const match = ROUTE.exec(request.url ?? '');
      if (request.url === '/readyz') return send(200, { status: 'ok' });
      if (!match) return send(404, { type: 'about:blank', title: 'Not Found', status: 404, code: 'not_found' }, 'application/problem+json');
      const key = decodeURIComponent(match[1]!);
      const body = (raw === '' ? {} : JSON.parse(raw)) as { ttlMs?: number; holder?: string; ownerToken?: string };
      const ttlMs = body.ttlMs ?? 30_000;
      const expiresAt = new Date(Date.now() + ttlMs).toISOString();
      switch (match[2]) {
        case 'acquire': {
          // The bug: no check that the lock is free. Tokens still go up, like keyholder's (microseconds).
          const fencingToken = Math.max((tokens.get(key) ?? 0) + 1, Date.now() * 1000);
          tokens.set(key, fencingToken);
          const ownerToken = randomBytes(16).toString('base64url');
          owners.set(ownerToken, fencingToken);
          grants++;
          index++;
          return send(200, { key, ownerToken, fencingToken, ttlMs, expiresAt, holder: body.holder ?? null });
        }
        case 'renew': {
          const fencingToken = owners.get(body.ownerToken ?? '');
          if (fencingToken === undefined) return send(409, { status: 409, code: 'not_owner' }, 'application/problem+json');
          return send(200, { key, fencingToken, ttlMs, expiresAt });
        }
        case 'release':
          owners.delete(body.ownerToken ?? '');
          return send(200, { released: true });
        default:
          return send(200, { key, held: false, index });
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    grants: () => grants,
    async stop() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
