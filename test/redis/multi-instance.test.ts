import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, KeyholderProcess } from '../helpers/keyholder-process.js';
import { RedisServer } from '../helpers/redis-server.js';

/**
 * Three keyholder processes share one Redis; 50 clients loop acquire -> critical section -> release on
 * a handful of keys. Nobody is ever inside one key's critical section together with another valid
 * holder, and tokens per key strictly increase in grant order.
 */
const INSTANCES = 3;
const CLIENTS = 50;
const KEYS = ['k1', 'k2', 'k3', 'k4', 'k5'];
const RUN_MS = 4_000;
const TTL_MS = 2_000;

let redis: RedisServer;
const instances: KeyholderProcess[] = [];

beforeAll(async () => {
  redis = await RedisServer.start();
  const started = await Promise.all(
    Array.from({ length: INSTANCES }, () => KeyholderProcess.start({ env: { REDIS_URL: redis.url, LOG_LEVEL: 'warn' } })),
  );
  instances.push(...started);
}, 180_000);

afterAll(async () => {
  await Promise.all(instances.map((i) => i.stop()));
  await redis.stop();
});

describe('several instances on one Redis', () => {
  it('never lets two valid holders into one critical section; tokens increase in grant order', async () => {
    // Per key: who is inside now, and the tokens in the order their grants were answered.
    const inside = new Map<string, { client: number; leaseEnd: number } | undefined>();
    const grantOrder = new Map<string, number[]>(KEYS.map((k) => [k, []]));
    const violations: string[] = [];
    let grants = 0;
    let conflicts = 0;
    const deadline = Date.now() + RUN_MS;

    const client = async (id: number) => {
      let n = 0;
      while (Date.now() < deadline) {
        const key = KEYS[(id + n++) % KEYS.length] as string;
        const base = (instances[(id + n) % INSTANCES] as KeyholderProcess).url;
        const requestedAt = Date.now();
        const res = await call(base, 'POST', `/v1/locks/${key}/acquire`, { ttlMs: TTL_MS, holder: `client-${id}` });
        if (res.status === 409) {
          conflicts++;
          await sleep(Math.random() * 10);
          continue;
        }
        expect(res.status).toBe(200);
        grants++;
        grantOrder.get(key)?.push(res.body.fencingToken as number);
        const current = inside.get(key);
        // Another holder inside whose lease (measured from its request start) is still valid: a violation.
        if (current && current.leaseEnd > Date.now()) violations.push(`${key}: client ${id} entered while client ${current.client} held it`);
        inside.set(key, { client: id, leaseEnd: requestedAt + TTL_MS });
        await sleep(Math.random() * 5); // the critical section
        if (inside.get(key)?.client === id) inside.set(key, undefined);
        const released = await call(base, 'POST', `/v1/locks/${key}/release`, { ownerToken: res.body.ownerToken });
        expect(released.status).toBe(200);
      }
    };

    await Promise.all(Array.from({ length: CLIENTS }, (_, id) => client(id)));

    expect(violations).toEqual([]);
    for (const [key, tokens] of grantOrder) {
      for (let i = 1; i < tokens.length; i++) {
        if (!((tokens[i] as number) > (tokens[i - 1] as number))) violations.push(`${key}: token ${tokens[i]} after ${tokens[i - 1]}`);
      }
    }
    expect(violations).toEqual([]);
    // Sanity: the run did real work (the count depends on the machine, so the floor is low).
    expect(grants).toBeGreaterThan(10);
    console.log(`multi-instance: ${grants} grants, ${conflicts} lock_held answers over ${RUN_MS} ms, ${INSTANCES} instances, ${CLIENTS} clients`);
  });
});
