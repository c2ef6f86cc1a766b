import { createServer, type IncomingMessage, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { FenceRegister, fencedWrite, fencingMiddleware } from '../../src/fencing/index.js';

/** Reads a request's whole body. */
async function bodyOf(request: IncomingMessage): Promise<string> {
  let body = '';
  for await (const chunk of request) body += String(chunk);
  return body;
}

/**
 * A resource behind the middleware on a real node:http server: each write is applied (appended to
 * `applied`) once its body has arrived, through `fencedWrite`.
 */
describe('fencing over HTTP: the token is checked when the write is applied', () => {
  let server: Server;
  let port = 0;
  const applied: number[] = [];
  const headersSeen: number[] = [];

  beforeAll(async () => {
    const check = fencingMiddleware({ register: new FenceRegister(), resourceOf: () => 'config' });
    server = createServer((req, res) =>
      check(req, res, () => {
        if (req.method === 'GET' || req.method === 'HEAD') {
          res.end(JSON.stringify(applied));
          return;
        }
        headersSeen.push(Number(req.headers['fencing-token']));
        void bodyOf(req).then(async (body) => {
          const outcome = await fencedWrite(req, res, () => applied.push(Number(JSON.parse(body).token)));
          if (outcome.committed) res.end('{}');
        });
      }),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });

  afterAll(async () => {
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
  });

  const put = (token: number) =>
    fetch(`http://127.0.0.1:${port}/config`, {
      method: 'PUT',
      headers: { 'fencing-token': String(token) },
      body: JSON.stringify({ token }),
    });

  /** A raw request whose headers and first body byte go now; `finish()` sends the rest and reads the status. */
  async function slowPut(token: number): Promise<{ socket: Socket; finish: () => Promise<number> }> {
    const body = JSON.stringify({ token });
    const socket = connect(port, '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (answer += chunk));
    socket.write(
      `PUT /config HTTP/1.1\r\nhost: 127.0.0.1\r\nfencing-token: ${token}\r\ncontent-type: application/json\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body.slice(0, 1)}`,
    );
    return {
      socket,
      async finish() {
        socket.end(body.slice(1));
        await new Promise((resolve) => socket.once('close', resolve));
        return Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]);
      },
    };
  }

  it('refuses a stale write whose body arrives after a newer write was applied', async () => {
    expect((await put(10)).status).toBe(200);
    const stale = await slowPut(20);
    // The stale request's headers have reached the handler before the newer write starts.
    await vi.waitFor(() => expect(headersSeen).toContain(20));
    expect((await put(21)).status).toBe(200);
    expect(await stale.finish()).toBe(409);
    expect(applied).toEqual([10, 21]);
  });

  it('lets reads through without a token', async () => {
    const get = await fetch(`http://127.0.0.1:${port}/config`);
    expect(get.status).toBe(200);
    expect(await get.json()).toEqual(applied);
    expect((await fetch(`http://127.0.0.1:${port}/config`, { method: 'HEAD' })).status).toBe(200);
  });
});

describe('FenceRegister.commit', () => {
  it('runs commits on one resource one at a time: a lower token checked while a higher one is being written is refused', async () => {
    const register = new FenceRegister();
    const written: number[] = [];
    let finishSlowWrite: () => void = () => undefined;
    const slowWrite = register.commit('r', 21, async () => {
      await new Promise<void>((resolve) => (finishSlowWrite = resolve));
      written.push(21);
    });
    const staleWrite = register.commit('r', 20, () => written.push(20));
    // Another resource is not held up by 'r'.
    expect(await register.commit('other', 1, () => 'ok')).toEqual({ committed: true, value: 'ok' });
    finishSlowWrite();
    expect(await slowWrite).toMatchObject({ committed: true });
    expect(await staleWrite).toEqual({ committed: false, highestSeen: 21 });
    expect(written).toEqual([21]);
  });

  it('records nothing for a write that throws, and goes on with the next commit', async () => {
    const register = new FenceRegister();
    await expect(register.commit('r', 30, () => Promise.reject(new Error('disk full')))).rejects.toThrow('disk full');
    expect(register.highestSeen('r')).toBeUndefined();
    expect(await register.commit('r', 5, () => 'ok')).toEqual({ committed: true, value: 'ok' });
    expect(register.highestSeen('r')).toBe(5);
  });
});
