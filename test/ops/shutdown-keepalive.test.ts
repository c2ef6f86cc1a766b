import { request as httpRequest, Agent } from 'node:http';
import { performance } from 'node:perf_hooks';
import { afterAll, describe, expect, it } from 'vitest';
import { call, KeyholderProcess } from '../helpers/keyholder-process.js';

/**
 * A request in flight when SIGTERM comes, on a keep-alive connection (what every pooled client and load
 * balancer uses): it is answered, and then the process exits at once, cleanly, not after the connection's
 * keep-alive timeout or the shutdown timeout.
 */
const running: KeyholderProcess[] = [];
afterAll(async () => {
  await Promise.all(running.map((p) => p.stop('SIGKILL')));
});

function post(agent: Agent, port: number, path: string, body: unknown): Promise<{ status: number; connection: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { agent, host: '127.0.0.1', port, method: 'POST', path, headers: { 'content-type': 'application/json' } },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection }));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

describe('SIGTERM while a request is in flight on a keep-alive connection', () => {
  it('answers it, then exits 0 promptly, not after HTTP_KEEP_ALIVE_TIMEOUT_MS or SHUTDOWN_TIMEOUT_MS', async () => {
    const proc = await KeyholderProcess.start({
      compiled: true,
      env: { HTTP_KEEP_ALIVE_TIMEOUT_MS: '65000', SHUTDOWN_TIMEOUT_MS: '10000' },
    });
    running.push(proc);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      // The request is in flight when the signal lands: its headers are in, its body still coming.
      const body = JSON.stringify({ ttlMs: 60_000 });
      let status = 0;
      let connection: string | undefined;
      const answered = new Promise<void>((resolve, reject) => {
        const req = httpRequest(
          {
            agent,
            host: '127.0.0.1',
            port: proc.port,
            method: 'POST',
            path: '/v1/locks/in-flight/acquire',
            headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
          },
          (res) => {
            status = res.statusCode ?? 0;
            connection = res.headers.connection;
            res.resume();
            res.on('end', () => resolve());
          },
        );
        req.on('error', reject);
        req.write(body.slice(0, 5));
        setTimeout(() => {
          proc.stop('SIGTERM').catch(() => undefined);
          setTimeout(() => req.end(body.slice(5)), 300);
        }, 300);
      });
      const signalledAt = performance.now();
      await answered;
      expect(status).toBe(200);
      const exited = new Promise<void>((resolve) => {
        const check = () => (proc.exit ? resolve() : setTimeout(check, 20));
        check();
      });
      await exited;
      const tookMs = performance.now() - signalledAt;
      process.stdout.write(
        `[keep-alive] answered with connection: ${connection}; exit ${JSON.stringify(proc.exit)} after ${Math.round(tookMs)} ms\n`,
      );
      expect(proc.exit).toEqual({ code: 0, signal: null });
      expect(tookMs).toBeLessThan(3_000);
      expect(proc.logs.join('\n')).not.toContain('shutdown timed out');
    } finally {
      agent.destroy();
    }
  }, 60_000);
});

describe('SIGTERM with a keep-alive connection busy', () => {
  it('answers the in-flight request, then exits 0 promptly (keep-alive timeout above the shutdown timeout)', async () => {
    const proc = await KeyholderProcess.start({
      compiled: true,
      env: { HTTP_KEEP_ALIVE_TIMEOUT_MS: '65000', SHUTDOWN_TIMEOUT_MS: '10000' },
    });
    running.push(proc);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const holder = await call(proc.url, 'POST', '/v1/locks/ka/acquire', { ttlMs: 60_000 });
      expect(holder.status).toBe(200);
      // In flight: a waiting acquire that the release below ends with a grant before the signal lands.
      const waiting = post(agent, proc.port, '/v1/locks/ka/acquire', { ttlMs: 60_000, waitMs: 20_000 });
      await expect.poll(async () => (await call(proc.url, 'GET', '/v1/locks/ka')).body.waiters, { timeout: 5_000, interval: 50 }).toBe(1);
      // A plain in-flight request on the same pooled connection right after: the wait's answer comes, the
      // connection stays open (keep-alive), and then the signal.
      const released = await call(proc.url, 'POST', '/v1/locks/ka/release', { ownerToken: holder.body.ownerToken });
      expect(released.status).toBe(200);
      const granted = await waiting;
      expect(granted.status).toBe(200);
      const signalledAt = performance.now();
      await proc.stop('SIGTERM');
      const tookMs = performance.now() - signalledAt;
      expect(proc.exit).toEqual({ code: 0, signal: null });
      expect(tookMs).toBeLessThan(3_000);
      expect(proc.logs.join('\n')).not.toContain('shutdown timed out');
    } finally {
      agent.destroy();
    }
  }, 60_000);
});
