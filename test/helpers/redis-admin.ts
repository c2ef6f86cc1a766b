import { Redis } from 'ioredis';

/**
 * What the topology helpers (Sentinel, Cluster) use to watch their servers: a short-lived plain client
 * on one port, and polling until a condition holds. Roles change on failover, so servers are asked by
 * port, each time on a fresh connection that gives up at once if the server is down.
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Polls `check` every `intervalMs` until it returns a value other than undefined, or throws after
 * `timeoutMs` (naming the last error `check` threw, if any).
 */
export async function until<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined>, intervalMs = 20): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: Error | undefined;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      last = err as Error;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? ` (${last.message})` : ''}`);
    await sleep(intervalMs);
  }
}

/** Runs `use` with a plain client on the server at `port` (no retries, no reconnects), then disconnects. */
export async function withClient<T>(port: number, use: (client: Redis) => Promise<T>): Promise<T> {
  const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return await use(client);
  } finally {
    client.disconnect();
  }
}
