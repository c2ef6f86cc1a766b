import { afterEach, describe, expect, it } from 'vitest';
import { createRedisClient } from '../../src/store/redis/client.js';
import { freePort, RedisServer } from '../helpers/redis-server.js';

/**
 * The client's two signals to the service, on a real redis-server that goes away and comes back:
 * onReady each time the connection is ready, onLost once per outage (the first error after being
 * ready), not once per reconnect attempt, and never before the first connection was made.
 */

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

async function until(done: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('Redis client: ready and lost', () => {
  it('onLost once per outage and onReady on each connection; failed attempts before the first connection are not an outage', async () => {
    const port = await freePort();
    let ready = 0;
    const lost: Error[] = [];
    const redis = createRedisClient(`redis://127.0.0.1:${port}`, {
      commandTimeoutMs: 2000,
      onReady: () => ready++,
      onLost: (err) => lost.push(err),
    });
    cleanup.push(() => redis.disconnect());
    let errors = 0;
    redis.on('error', () => errors++);

    // Nothing listens yet: the attempts fail, and no outage is reported (the service was never up).
    await until(() => errors >= 2, 'two failed connection attempts');
    expect(lost).toEqual([]);
    expect(ready).toBe(0);

    const server = await RedisServer.start({}, port);
    cleanup.push(() => server.stop());
    await until(() => ready === 1, 'the client ready');
    expect(await redis.ping()).toBe('PONG');
    expect(lost).toEqual([]);

    // The server dies: one outage, however many attempts fail while it is down.
    await server.kill();
    const errorsBefore = errors;
    await until(() => errors >= errorsBefore + 3, 'three failed reconnection attempts');
    expect(lost).toHaveLength(1);
    expect(ready).toBe(1);

    // Back: ready again, and the next outage is reported again.
    await server.launch();
    await until(() => ready === 2, 'the client ready again');
    await server.kill();
    await until(() => lost.length === 2, 'the second outage reported');
  });

  it('works without the two callbacks', async () => {
    const server = await RedisServer.start();
    cleanup.push(() => server.stop());
    const redis = createRedisClient(server.url, { commandTimeoutMs: 2000 });
    cleanup.push(() => redis.disconnect());
    let errors = 0;
    redis.on('error', () => errors++);
    await until(() => redis.status === 'ready', 'the client ready');
    await server.kill();
    await until(() => errors >= 1, 'the outage seen');
    expect(redis.status).not.toBe('ready');
  });
});
