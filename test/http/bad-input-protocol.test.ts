import { connect, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeKeys } from '../helpers/api-keys.js';
import { buildTestApp, FULL_ACCESS_LOG, type TestApp } from '../helpers/test-app.js';

/**
 * Bad input below the routes, sent as raw bytes on a socket: what Node's HTTP parser, Fastify's router
 * and the method table refuse. Each answer is problem+json with a stable code, and a valid request on a
 * new connection succeeds right after.
 */
const keys = makeKeys([
  { id: 'team-key', namespace: 'team', scopes: ['locks'] },
  { id: 'other-key', namespace: 'other', scopes: ['locks'] },
]);
const KEY = keys.plain['team-key'] ?? '';
const OTHER = keys.plain['other-key'] ?? '';

let t: TestApp;
let port: number;
beforeAll(async () => {
  t = await buildTestApp({
    auth: { mode: 'keys', keyring: keys.keyring() },
    httpTimeouts: { requestTimeoutMs: 2_000, headersTimeoutMs: 1_000, keepAliveTimeoutMs: 5_000, connectionTimeoutMs: 75_000 },
    accessLog: FULL_ACCESS_LOG,
  });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  port = (t.app.server.address() as AddressInfo).port;
});
afterAll(async () => {
  await t.close();
});

interface Parsed {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Sends raw bytes (optionally in pieces, `delayMs` apart) and parses the first answer. */
function exchange(pieces: string[], delayMs = 0): Promise<Parsed> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    const finish = () => {
      const at = received.indexOf('\r\n\r\n');
      if (at < 0) return reject(new Error(`no complete answer: ${JSON.stringify(received.slice(0, 300))}`));
      const [statusLine = '', ...lines] = received.slice(0, at).split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      const length = Number(headers['content-length'] ?? 0);
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: received.slice(at + 4, at + 4 + length) });
    };
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      const at = received.indexOf('\r\n\r\n');
      const length = /content-length:\s*(\d+)/i.exec(received.slice(0, Math.max(at, 0)))?.[1];
      if (at >= 0 && length !== undefined && received.length >= at + 4 + Number(length)) {
        socket.destroy();
        finish();
      }
    });
    socket.on('close', () => finish());
    socket.on('error', () => undefined);
    socket.setTimeout(15_000, () => socket.destroy());
    void (async () => {
      for (const piece of pieces) {
        if (socket.destroyed) return;
        socket.write(piece);
        if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
      }
    })();
  });
}

let served = 0;
async function stillServes(): Promise<void> {
  const body = JSON.stringify({ ttlMs: 1000 });
  const res = await exchange([
    `POST /v1/locks/after-protocol-${++served}/acquire HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
  ]);
  expect(res.status).toBe(200);
}

const auth = `Authorization: Bearer ${KEY}\r\n`;
const json = (body: string) => `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n`;

interface Case {
  name: string;
  pieces: string[];
  delayMs?: number;
  status: number;
  code: string;
  header?: [string, string];
}

const CASES: Case[] = [
  { name: 'a request line that is not HTTP', pieces: ['HELLO THERE\r\n\r\n'], status: 400, code: 'invalid_request' },
  { name: 'an unknown HTTP version', pieces: ['GET /livez HTTP/9.9\r\nHost: x\r\n\r\n'], status: 400, code: 'invalid_request' },
  {
    name: 'a header line without a colon',
    pieces: [`GET /v1/locks/k HTTP/1.1\r\nHost: x\r\n${auth}NoColonHere\r\n\r\n`],
    status: 400,
    code: 'invalid_request',
  },
  {
    name: 'a space in a header name',
    pieces: [`GET /v1/locks/k HTTP/1.1\r\nHost: x\r\n${auth}Bad Name: 1\r\n\r\n`],
    status: 400,
    code: 'invalid_request',
  },
  {
    name: 'a control character in a header value',
    pieces: [`GET /v1/locks/k HTTP/1.1\r\nHost: x\r\n${auth}X-A: a\x01b\r\n\r\n`],
    status: 400,
    code: 'invalid_request',
  },
  {
    name: 'headers over the size limit',
    pieces: [`GET /v1/locks/k HTTP/1.1\r\nHost: x\r\n${auth}X-Pad: ${'p'.repeat(20_000)}\r\n\r\n`],
    status: 431,
    code: 'headers_too_large',
  },
  {
    name: 'a URL over the header size limit',
    pieces: [`GET /v1/locks/${'k'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n${auth}\r\n`],
    status: 431,
    code: 'headers_too_large',
  },
  {
    name: 'a Content-Length that is not a number',
    pieces: [`POST /v1/locks/k/acquire HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: ten\r\n\r\n{}`],
    status: 400,
    code: 'invalid_request',
  },
  {
    name: 'two different Content-Lengths',
    pieces: [
      `POST /v1/locks/k/acquire HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}`,
    ],
    status: 400,
    code: 'invalid_request',
  },
  {
    name: 'Content-Length and chunked together',
    pieces: [
      `POST /v1/locks/k/acquire HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n`,
    ],
    status: 400,
    code: 'invalid_request',
  },
  {
    name: 'a broken chunk size',
    pieces: [
      `POST /v1/locks/k/acquire HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`,
    ],
    status: 400,
    code: 'invalid_request',
  },
  {
    name: 'an unknown transfer coding',
    pieces: [`POST /v1/locks/k/acquire HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nTransfer-Encoding: gzip\r\n\r\n{}`],
    status: 400,
    code: 'invalid_request',
  },
  {
    name: 'a chunked body over the limit',
    pieces: [
      `POST /v1/locks/k/acquire HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n4000\r\n${'x'.repeat(0x4000)}\r\n0\r\n\r\n`,
    ],
    status: 413,
    code: 'payload_too_large',
  },
  {
    name: 'a body shorter than its Content-Length (timeout)',
    pieces: [
      `POST /v1/locks/k/acquire HTTP/1.1\r\nHost: x\r\n${auth}${json('{"ttlMs":1000}').replace(/Content-Length: \d+/, 'Content-Length: 50')}\r\n{"ttlMs":1000}`,
    ],
    status: 408,
    code: 'request_timeout',
  },
  {
    name: 'headers sent too slowly',
    pieces: ['GET /livez HTTP/1.1\r\n', 'Host: x\r\n', 'X-A: 1\r\n', 'X-B: 2\r\n', 'X-C: 3\r\n', '\r\n'],
    delayMs: 600,
    status: 408,
    code: 'request_timeout',
  },
  {
    name: 'bad percent-encoding in the path',
    pieces: [`GET /v1/locks/%ZZ HTTP/1.1\r\nHost: x\r\n${auth}\r\n`],
    status: 400,
    code: 'invalid_request',
  },
  {
    name: 'an unknown Expect',
    pieces: [`POST /v1/locks/k/acquire HTTP/1.1\r\nHost: x\r\n${auth}Expect: 200-ok\r\n${json('{"ttlMs":1000}')}\r\n`],
    status: 417,
    code: 'expectation_failed',
  },
  {
    name: 'Expect: 100-continue with a body over the limit',
    pieces: [
      `POST /v1/locks/k/acquire HTTP/1.1\r\nHost: x\r\n${auth}Expect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: 2097152\r\n\r\n`,
    ],
    status: 413,
    code: 'payload_too_large',
  },
  {
    name: 'two Authorization headers',
    pieces: [`GET /v1/locks/k HTTP/1.1\r\nHost: x\r\n${auth}Authorization: Bearer ${OTHER}\r\n\r\n`],
    status: 400,
    code: 'invalid_request',
  },
  {
    name: 'an Authorization scheme other than Bearer',
    pieces: [`GET /v1/locks/k HTTP/1.1\r\nHost: x\r\nAuthorization: Basic dXNlcjpwYXNz\r\n\r\n`],
    status: 401,
    code: 'unauthenticated',
    header: ['www-authenticate', 'Bearer realm="keyholder", error="invalid_token"'],
  },
  {
    name: 'PUT on an acquire path',
    pieces: [`PUT /v1/locks/k/acquire HTTP/1.1\r\nHost: x\r\n${auth}\r\n`],
    status: 405,
    code: 'method_not_allowed',
    header: ['allow', 'POST'],
  },
  {
    name: 'GET on a release path',
    pieces: [`GET /v1/locks/k/release HTTP/1.1\r\nHost: x\r\n${auth}\r\n`],
    status: 405,
    code: 'method_not_allowed',
    header: ['allow', 'POST'],
  },
  {
    name: 'PATCH on a lock',
    pieces: [`PATCH /v1/locks/k HTTP/1.1\r\nHost: x\r\n${auth}\r\n`],
    status: 405,
    code: 'method_not_allowed',
    header: ['allow', 'GET, HEAD, DELETE'],
  },
  {
    name: 'POST on the lock list',
    pieces: [`POST /v1/locks HTTP/1.1\r\nHost: x\r\n${auth}${json('{}')}\r\n{}`],
    status: 405,
    code: 'method_not_allowed',
    header: ['allow', 'GET, HEAD'],
  },
  {
    name: 'DELETE on /livez',
    pieces: [`DELETE /livez HTTP/1.1\r\nHost: x\r\n${auth}\r\n`],
    status: 405,
    code: 'method_not_allowed',
    header: ['allow', 'GET, HEAD'],
  },
  { name: 'an unknown path', pieces: [`GET /v2/locks/k HTTP/1.1\r\nHost: x\r\n${auth}\r\n`], status: 404, code: 'not_found' },
];

describe('bad input at the protocol level', () => {
  for (const c of CASES) {
    it(`${c.name} -> ${c.status} ${c.code}`, async () => {
      const res = await exchange(c.pieces, c.delayMs);
      expect(res.status, res.body).toBe(c.status);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(JSON.parse(res.body)).toMatchObject({ status: c.status, code: c.code });
      if (c.header) expect(res.headers[c.header[0]]).toBe(c.header[1]);
      await stillServes();
    });
  }

  it('keeps no raw request bytes (credentials included) in the logs', () => {
    const all = t.logs.join('\n');
    expect(all).not.toContain('rawPacket');
    expect(all).not.toContain(KEY);
    expect(all).not.toContain(OTHER);
  });
});
