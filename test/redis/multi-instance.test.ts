import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, KeyholderProcess } from '../helpers/keyholder-process.js';
import { RedisServer } from '../helpers/redis-server.js';

/**
 * Three keyholder processes share one Redis; 50 clients loop acquire -> critical section -> release on
 * a handful of keys. No two grants of one key are ever surely held at the same time, and tokens per
 * key strictly increase in grant order.
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

/** One grant as its client saw it, on this process's monotonic clock (performance.now()). */
interface SeenGrant {
  readonly key: string;
  readonly client: number;
  readonly fencingToken: number;
  readonly requestedAt: number;
  readonly answeredAt: number;
  releaseRequestedAt: number;
}

/**
 * The stretch in which a grant is surely held: from its answer until its release was sent, but no
 * later than its request time + TTL (the store started the lease after the request left, so it cannot
 * have ended sooner), less a margin for the store's clock against this one (same host: rounding only).
 */
const CLOCK_MARGIN_MS = 25;
const surelyHeld = (g: SeenGrant) => ({
  from: g.answeredAt,
  until: Math.min(g.releaseRequestedAt, g.requestedAt + TTL_MS - CLOCK_MARGIN_MS),
});

describe('several instances on one Redis', () => {
  it('never lets two holders of one key overlap; tokens increase in grant order', async () => {
    const seen: SeenGrant[] = [];
    let conflicts = 0;
    const deadline = performance.now() + RUN_MS;

    const client = async (id: number) => {
      let n = 0;
      while (performance.now() < deadline) {
        const key = KEYS[(id + n++) % KEYS.length] as string;
        const base = (instances[(id + n) % INSTANCES] as KeyholderProcess).url;
        const requestedAt = performance.now();
        const res = await call(base, 'POST', `/v1/locks/${key}/acquire`, { ttlMs: TTL_MS, holder: `client-${id}` });
        const answeredAt = performance.now();
        if (res.status === 409) {
          conflicts++;
          await sleep(Math.random() * 10);
          continue;
        }
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        const grant: SeenGrant = {
          key,
          client: id,
          fencingToken: res.body.fencingToken as number,
          requestedAt,
          answeredAt,
          releaseRequestedAt: Infinity,
        };
        seen.push(grant);
        await sleep(Math.random() * 20); // the critical section
        grant.releaseRequestedAt = performance.now();
        const released = await call(base, 'POST', `/v1/locks/${key}/release`, { ownerToken: res.body.ownerToken });
        // On a starved machine the release can reach the store after the lease ran out: a 409 then. The
        // lease cannot have ended before its request time + TTL, so a 409 answered earlier than that is
        // a lease lost too soon.
        if (released.status === 409)
          expect(performance.now(), 'a release refused before the lease could have ended').toBeGreaterThan(
            requestedAt + TTL_MS - CLOCK_MARGIN_MS,
          );
        else expect(released.status).toBe(200);
      }
    };

    await Promise.all(Array.from({ length: CLIENTS }, (_, id) => client(id)));

    // Every pair of grants of one key, over the whole time each was held (not just the moment of a grant).
    const violations: string[] = [];
    for (const key of KEYS) {
      const grants = seen.filter((g) => g.key === key).sort((a, b) => a.answeredAt - b.answeredAt);
      for (let i = 0; i < grants.length; i++) {
        const a = grants[i] as SeenGrant;
        const held = surelyHeld(a);
        for (let j = i + 1; j < grants.length; j++) {
          const b = grants[j] as SeenGrant;
          if (b.answeredAt >= held.until) break;
          const other = surelyHeld(b);
          if (other.from < held.until && other.until > held.from) {
            violations.push(
              `${key}: client ${b.client} (token ${b.fencingToken}) held it while client ${a.client} (token ${a.fencingToken}) did`,
            );
          }
        }
        // Answered later means granted later (the earlier holder released first): the token must be higher.
        const next = grants[i + 1];
        if (next && !(next.fencingToken > a.fencingToken)) violations.push(`${key}: token ${next.fencingToken} after ${a.fencingToken}`);
      }
    }
    expect(violations).toEqual([]);
    // Sanity: the run did real work (the count depends on the machine, so the floor is low).
    expect(seen.length).toBeGreaterThan(10);
    console.log(
      `multi-instance: ${seen.length} grants, ${conflicts} lock_held answers over ${RUN_MS} ms, ${INSTANCES} instances, ${CLIENTS} clients`,
    );
  });
});
