import { connect } from 'node:net';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { call, KeyholderProcess } from '../helpers/keyholder-process.js';

/** The real server process: start-up messages, restart behaviour, logs and graceful shutdown. */
const running: KeyholderProcess[] = [];
afterAll(async () => {
  await Promise.all(running.map((p) => p.stop('SIGKILL')));
});

async function start(env: Record<string, string> = {}) {
  const proc = await KeyholderProcess.start({ env });
  running.push(proc);
  return proc;
}

/** Sends raw bytes and returns everything the server answers until it closes the connection. */
function rawExchange(port: number, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.end(bytes));
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('utf8')));
    socket.on('close', () => resolve(received));
    socket.on('error', reject);
    socket.setTimeout(10_000, () => socket.destroy(new Error('no answer')));
  });
}

describe('server process', () => {
  it('warns once that the embedded store is not shared, and /readyz names it', async () => {
    const proc = await start();
    const warnings = proc.jsonLogs().filter((l) => l.level === 40 && String(l.msg).includes('embedded store'));
    expect(warnings).toHaveLength(1);
    expect((await call(proc.url, 'GET', '/readyz')).body).toEqual({ status: 'ready', store: 'memory' });
    await proc.stop();
  });

  it('embedded store: tokens after a restart are greater than every token before', async () => {
    const proc = await start();
    let highest = 0;
    for (let i = 0; i < 30; i++) {
      const grant = await call(proc.url, 'POST', '/v1/locks/restart-me/acquire', { ttlMs: 60_000 });
      highest = grant.body.fencingToken as number;
      await call(proc.url, 'POST', '/v1/locks/restart-me/release', { ownerToken: grant.body.ownerToken });
    }
    await proc.stop('SIGKILL');
    await proc.launch();
    const after = await call(proc.url, 'POST', '/v1/locks/restart-me/acquire', { ttlMs: 60_000 });
    expect(after.status).toBe(200);
    expect(after.body.fencingToken as number).toBeGreaterThan(highest);
    await proc.stop();
  });

  it('ACCESS_LOG=full: one log line per request with method, route, status, duration and key, and never an owner token', async () => {
    const proc = await start({ ACCESS_LOG: 'full' });
    const grant = await call(proc.url, 'POST', '/v1/locks/logged/acquire', { ttlMs: 10_000, holder: 'w1' });
    const token = grant.body.ownerToken as string;
    await call(proc.url, 'POST', '/v1/locks/logged/renew', { ownerToken: token, ttlMs: 10_000 });
    await call(proc.url, 'POST', '/v1/locks/logged/release', { ownerToken: token });
    await call(proc.url, 'POST', '/v1/locks/logged/release', { ownerToken: token });
    await call(proc.url, 'POST', '/v1/locks/logged/renew', { ownerToken: token, ttlMs: 5 });
    await proc.stop();
    const requestLines = proc.jsonLogs().filter((l) => l.msg === 'request' && l.key === 'logged');
    expect(requestLines).toHaveLength(5);
    expect(requestLines.find((l) => l.route === '/v1/locks/:key/acquire')).toMatchObject({ method: 'POST', status: 200, key: 'logged' });
    expect(typeof requestLines[0]?.durationMs).toBe('number');
    // Lines are written as responses finish, which may interleave with the next request's: compare as a set.
    expect(requestLines.map((l) => l.status).sort()).toEqual([200, 200, 200, 400, 409]);
    expect(proc.logs.join('\n')).not.toContain(token);
  });

  it('log lines are written in batches, yet a request line reaches stdout while the server runs, with its request id', async () => {
    const proc = await start({ ACCESS_LOG: 'full' });
    const answer = await call(proc.url, 'POST', '/v1/locks/prompt-line/acquire', { ttlMs: 10_000 });
    expect(answer.status).toBe(200);
    // Flushed every 200 ms on a quiet instance: waited for, not slept on (a busy machine may be slower).
    await vi.waitFor(() => expect(proc.jsonLogs().some((l) => l.msg === 'request' && l.key === 'prompt-line')).toBe(true), {
      timeout: 10_000,
      interval: 20,
    });
    const line = proc.jsonLogs().find((l) => l.msg === 'request' && l.key === 'prompt-line');
    expect(line).toMatchObject({ method: 'POST', route: '/v1/locks/:key/acquire', status: 200 });
    expect(typeof line?.reqId).toBe('string');
    const raw = proc.logs.find((l) => l.includes('"prompt-line"') && l.includes('"msg":"request"'));
    expect(raw?.match(/"reqId"/g)).toHaveLength(1);
    await proc.stop();
  });

  it('by default, request counts by route and status while the server runs, and a sampled line', async () => {
    const proc = await start({ ACCESS_LOG_SUMMARY_MS: '200', ACCESS_LOG_SAMPLE_EVERY: '3' });
    for (let i = 0; i < 3; i++)
      expect((await call(proc.url, 'POST', `/v1/locks/sampled-${i}/acquire`, { ttlMs: 10_000 })).status).toBe(200);
    // On a busy machine the three calls may fall into more than one 200 ms interval: the summaries add up.
    const summaries = () => proc.jsonLogs().filter((l) => l.msg === 'requests');
    const counted = () => summaries().reduce((n, l) => n + Number(l.requests), 0);
    await vi.waitFor(() => expect(counted()).toBe(3), { timeout: 10_000, interval: 20 });
    for (const summary of summaries()) {
      expect(summary).toMatchObject({ routes: [{ method: 'POST', route: '/v1/locks/:key/acquire', count: summary.requests }] });
      expect(summary.routes).toEqual([expect.objectContaining({ status: { 200: summary.requests } })]);
    }
    await vi.waitFor(() => expect(proc.jsonLogs().filter((l) => l.msg === 'request')).toHaveLength(1), { timeout: 10_000, interval: 20 });
    expect(proc.jsonLogs().find((l) => l.msg === 'request')).toMatchObject({ sampledOneIn: 3, status: 200 });
    await proc.stop();
  });

  it('LOG_LEVEL is honoured', async () => {
    const proc = await start({ LOG_LEVEL: 'warn' });
    await call(proc.url, 'POST', '/v1/locks/quiet/acquire', { ttlMs: 1_000 });
    await proc.stop();
    expect(proc.jsonLogs().filter((l) => l.msg === 'request')).toHaveLength(0);
  });

  it('SIGHUP in open mode keeps the process and its locks; at trace level a malformed request leaves no raw bytes in the log', async () => {
    const proc = await start({ LOG_LEVEL: 'trace' });
    const grant = await call(proc.url, 'POST', '/v1/locks/hup/acquire', { ttlMs: 60_000 });
    expect(grant.status).toBe(200);
    process.kill(proc.pid ?? 0, 'SIGHUP');
    await vi.waitFor(() => expect(proc.logs.join('\n')).toContain('no API keys to reload'), { timeout: 10_000 });
    expect(proc.exit).toBeUndefined();
    expect((await call(proc.url, 'GET', '/v1/locks/hup')).body).toMatchObject({ held: true, fencingToken: grant.body.fencingToken });

    const secret = 'kh_rawbytessecret0123456789abcdefghij';
    const token = grant.body.ownerToken as string;
    const body = JSON.stringify({ ownerToken: token });
    const answer = await rawExchange(
      proc.port,
      `POST /v1/locks/hup/release HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${secret}\r\nContent-Length: 1x\r\n\r\n${body}`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 400/);
    await vi.waitFor(() => expect(proc.logs.join('\n')).toContain('client error'), { timeout: 10_000 });
    const all = proc.logs.join('\n');
    expect(all).not.toContain('rawPacket');
    expect(all).not.toContain(secret);
    expect(all).not.toContain(token);
    await proc.stop();
  });

  it('SIGTERM: finishes cleanly and exits 0', async () => {
    const proc = await start();
    await proc.stop('SIGTERM');
    expect(proc.exit).toEqual({ code: 0, signal: null });
    expect(proc.logs.join('\n')).toContain('shut down cleanly');
  });

  it('invalid configuration exits with a message naming the variable', async () => {
    await expect(KeyholderProcess.start({ env: { LOCK_MAX_TTL_MS: 'lots' }, waitFor: 'livez' })).rejects.toThrow(/LOCK_MAX_TTL_MS/);
    await expect(KeyholderProcess.start({ env: { NODE_ENV: 'production' }, waitFor: 'livez' })).rejects.toThrow(
      /REDIS_URL.*KEYHOLDER_STORE=memory/s,
    );
  });
});
