import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runProcess } from './tools.js';

/** One request as the other origin saw it. */
export interface SeenRequest {
  readonly method: string;
  readonly url: string;
  readonly authorization: string | undefined;
  readonly body: string;
}

/**
 * Servers that answer like a keyholder gone wrong, for client tests. Each behaviour is a base-URL prefix:
 * a client made with baseUrl `${http}/redirect-other` sends `POST /redirect-other/v1/locks/k/acquire`.
 *
 * - `grant`: a well-formed 200 for acquire, renew and release (the control: a client that refuses
 *   everything would pass the other cases too).
 * - `redirect-other`: 302 to the same path on another origin (`other`), which records what reaches it
 *   and answers with a well-formed grant, so a client that follows gets a plausible lease.
 * - `to-http` (on `https`): 302 from https to the other origin over plain http.
 * - `empty-200`, `wrong-types`, `not-json`: a 200 without a grant; `created`: 201 with a well-formed one;
 *   `no-content`: 204.
 * - `other-token`: a well-formed grant (fencing token 7, the TTL asked), then renewals that are well-formed
 *   but carry fencing token 8, as a server or proxy that mixed up two leases would; for a lock set
 *   (`/v1/lock-sets/...`), each key's token 7 + its position, then one higher in each renewal.
 *
 * `https` serves the same behaviours with a self-signed certificate for 127.0.0.1 made by the openssl
 * command (Node cannot make X.509 certificates itself); `caFile` is that certificate.
 */
export class HostileServers {
  private constructor(
    /** Every request that reached the other origin. */
    readonly otherSeen: readonly SeenRequest[],
    readonly http: string,
    readonly https: string,
    readonly other: string,
    readonly caFile: string,
    private readonly servers: Server[],
    private readonly dir: string,
  ) {}

  get caPem(): string {
    return readFileSync(this.caFile, 'utf8');
  }

  static async start(): Promise<HostileServers> {
    const dir = mkdtempSync(join(tmpdir(), 'keyholder-hostile-'));
    const keyFile = join(dir, 'key.pem');
    const caFile = join(dir, 'cert.pem');
    // An EC key: generated in milliseconds, where RSA can take a second on a busy machine.
    const made = await runProcess('openssl', [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      keyFile,
      '-out',
      caFile,
      '-days',
      '2',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ]);
    if (made.status !== 0) throw new Error(`openssl req failed: ${made.stderr}`);

    const otherSeen: SeenRequest[] = [];
    const other = createHttpServer((req, res) => {
      void readBody(req).then((body) => {
        otherSeen.push({ method: req.method ?? '', url: req.url ?? '', authorization: req.headers.authorization, body });
        answerLikeKeyholder(req, res);
      });
    });
    const otherUrl = await listen(other);
    const handler = (req: IncomingMessage, res: ServerResponse) => {
      void readBody(req).then((body) => misbehave(req, res, otherUrl, body));
    };
    const http = createHttpServer(handler);
    const https = createHttpsServer({ key: readFileSync(keyFile), cert: readFileSync(caFile) }, handler);
    const servers = [other, http, https];
    const httpUrl = await listen(http);
    const httpsUrl = (await listen(https)).replace('http:', 'https:');
    return new HostileServers(otherSeen, httpUrl, httpsUrl, otherUrl, caFile, servers, dir);
  }

  async close(): Promise<void> {
    await Promise.all(
      this.servers.map(
        (s) =>
          new Promise<void>((resolve) => {
            s.closeAllConnections();
            s.close(() => resolve());
          }),
      ),
    );
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function listen(server: Server): Promise<string> {
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)),
  );
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(body));
}

/** A well-formed answer for acquire, renew or release of the key in the path, as keyholder gives it. */
function answerLikeKeyholder(req: IncomingMessage, res: ServerResponse, status = 200): void {
  const match = /\/v1\/locks\/([^/?]+)\/(acquire|renew|release)/.exec(req.url ?? '');
  const key = decodeURIComponent(match?.[1] ?? 'unknown');
  const lease = { key, fencingToken: 7, ttlMs: 10_000, expiresAt: new Date(Date.now() + 10_000).toISOString() };
  if (match?.[2] === 'acquire') return json(res, status, { ...lease, ownerToken: 'hostile-owner-token-0001', holder: null });
  if (match?.[2] === 'renew') return json(res, status, lease);
  if (match?.[2] === 'release') return json(res, status, { key, released: true });
  json(res, 404, {});
}

/** `other-token`: grants with the TTL asked, renewals with a fencing token one higher than the grant's. */
function tokenSwapper(req: IncomingMessage, res: ServerResponse, body: string): void {
  const asked = (JSON.parse(body || '{}') ?? {}) as { ttlMs?: number; keys?: string[] };
  const ttlMs = asked.ttlMs ?? 10_000;
  const lease = { ttlMs, expiresAt: new Date(Date.now() + ttlMs).toISOString() };
  const set = /\/v1\/lock-sets\/(acquire|renew|release)/.exec(req.url ?? '');
  if (set) {
    const locks = (bump: number) => (asked.keys ?? []).map((key, i) => ({ key, fencingToken: 7 + i + bump }));
    if (set[1] === 'acquire') return json(res, 200, { ownerToken: 'hostile-owner-token-0001', holder: null, locks: locks(0), ...lease });
    if (set[1] === 'renew') return json(res, 200, { locks: locks(1), ...lease });
    return json(res, 200, { released: true });
  }
  const match = /\/v1\/(locks|semaphores|rwlocks)\/([^/?]+)\/(acquire|renew|release)/.exec(req.url ?? '');
  const key = decodeURIComponent(match?.[2] ?? 'unknown');
  if (match?.[3] === 'acquire') {
    const kind = match[1] === 'semaphores' ? { limit: 1 } : match[1] === 'rwlocks' ? { mode: 'write' } : {};
    return json(res, 200, { key, fencingToken: 7, ...lease, ownerToken: 'hostile-owner-token-0001', holder: null, ...kind });
  }
  if (match?.[3] === 'renew') return json(res, 200, { key, fencingToken: 8, ...lease });
  if (match?.[3] === 'release') return json(res, 200, { key, released: true });
  json(res, 404, {});
}

function misbehave(req: IncomingMessage, res: ServerResponse, otherUrl: string, body: string): void {
  const url = req.url ?? '/';
  const [, behaviour = '', rest = ''] = /^\/([^/]+)(.*)$/.exec(url) ?? [];
  switch (behaviour) {
    case 'grant':
      return answerLikeKeyholder(req, res);
    case 'redirect-other':
    case 'to-http':
      // 302, which fetch and urllib both follow for a POST too (as a GET); many do not follow a 307 POST.
      res.writeHead(302, { location: `${otherUrl}${rest}` }).end();
      return;
    case 'empty-200':
      return json(res, 200, {});
    case 'wrong-types':
      return json(res, 200, {
        key: 'k',
        ownerToken: 'hostile-owner-token-0001',
        fencingToken: '7',
        ttlMs: '10000',
        expiresAt: 'soon',
        holder: null,
      });
    case 'not-json':
      res.writeHead(200, { 'content-type': 'text/html' }).end('<html><body>Sign in</body></html>');
      return;
    case 'created':
      return answerLikeKeyholder(req, res, 201);
    case 'no-content':
      res.writeHead(204).end();
      return;
    case 'other-token':
      return tokenSwapper(req, res, body);
    default:
      json(res, 404, {});
  }
}
