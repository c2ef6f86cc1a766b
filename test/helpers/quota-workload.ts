import { expect } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { KeySpace } from '../../src/store/redis/keys.js';
import { slotOf } from '../../src/store/redis/slot.js';
import { lockId } from '../../src/domain/namespaces.js';

/**
 * A random mix of every primitive against one namespace under a small, exact quota
 * (one shard), through the HTTP API. It checks the two sides of docs/limits.md's bound:
 * - never above the limit: the leases the workers have been answered 200 for and not yet sent a release
 *   for are a lower bound of what the store holds, so never more than the limit;
 * - every unit given back exactly: once every lease has been released or force-released (nothing left
 *   to expire, no 503), a fill of fresh locks gets exactly `limit`, neither fewer (a unit kept) nor more
 *   (a unit given back twice).
 */
export interface WorkloadReport {
  readonly statuses: Record<string, number>;
  readonly maxHeldSeen: number;
  readonly fill: number;
}

type Kind = 'lock' | 'semaphore' | 'rwread' | 'rwwrite' | 'set';
interface Held {
  readonly kind: Kind;
  readonly key: string;
  readonly keys?: readonly string[];
  readonly ownerToken: string;
  readonly fencingToken?: number;
}

const NS = 'default';

/** Two lock keys of the namespace in one Cluster hash slot (a lock set must be, on a Cluster). */
function sameSlotPairs(count: number): [string, string][] {
  const space = new KeySpace('x:');
  const bySlot = new Map<number, string>();
  const pairs: [string, string][] = [];
  for (let i = 0; pairs.length < count; i++) {
    const key = `set-${i}`;
    const slot = slotOf(space.lock(lockId(NS, key)));
    const other = bySlot.get(slot);
    if (other === undefined) bySlot.set(slot, key);
    else {
      pairs.push([other, key]);
      bySlot.delete(slot);
    }
  }
  return pairs;
}

export async function quotaWorkload(
  app: FastifyInstance,
  options: {
    limit: number;
    workers: number;
    durationMs: number;
    seed?: number;
    /** Lease lengths, ms (from, to). */
    ttlMs?: readonly [number, number];
    /** Called once every worker has stopped and before the leases still held are released: how many keys are held. */
    quiescent?: (heldKeys: number) => Promise<void>;
    /** Called once everything is released, before the fill. */
    released?: () => Promise<void>;
    /** No fill at the end. */
    noFill?: boolean;
  },
): Promise<WorkloadReport> {
  const { limit } = options;
  let seed = options.seed ?? 12345;
  const rand = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x7fffffff;
  };
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
  const statuses: Record<string, number> = {};
  const note = (what: string, status: number) => {
    const k = `${what} ${status}`;
    statuses[k] = (statuses[k] ?? 0) + 1;
  };
  const post = async (url: string, payload: object) => {
    const res = await app.inject({ method: 'POST', url, payload });
    return { status: res.statusCode, body: res.json<Record<string, unknown>>() };
  };
  const held = new Set<Held>();
  let maxHeldSeen = 0;
  const pairs = sameSlotPairs(4);
  const lockKeys = ['l0', 'l1', 'l2', 'l3'];
  const semKeys = ['s0', 's1'];
  const rwKeys = ['r0', 'r1'];

  const [ttlFrom, ttlTo] = options.ttlMs ?? [5_000, 10_000];
  const newTtl = () => ttlFrom + Math.floor(rand() * (ttlTo - ttlFrom));
  async function acquire(kind: Kind): Promise<Held | undefined> {
    const ttlMs = newTtl();
    const waitMs = rand() < 0.5 ? 0 : Math.floor(rand() * 400);
    let res: { status: number; body: Record<string, unknown> };
    let key: string;
    let keys: readonly string[] | undefined;
    if (kind === 'lock') {
      key = pick(lockKeys);
      res = await post(`/v1/locks/${key}/acquire`, { ttlMs, waitMs });
    } else if (kind === 'semaphore') {
      key = pick(semKeys);
      res = await post(`/v1/semaphores/${key}/acquire`, { limit: 3, ttlMs, waitMs });
    } else if (kind === 'rwread' || kind === 'rwwrite') {
      key = pick(rwKeys);
      res = await post(`/v1/rwlocks/${key}/acquire`, { mode: kind === 'rwread' ? 'read' : 'write', ttlMs, waitMs });
    } else {
      keys = pick(pairs);
      key = keys.join(',');
      res = await post('/v1/lock-sets/acquire', { keys, ttlMs, waitMs });
    }
    note(`${kind} acquire`, res.status);
    if (res.status !== 200) return undefined;
    const fencingToken = typeof res.body.fencingToken === 'number' ? res.body.fencingToken : undefined;
    const lease: Held = { kind, key, keys, ownerToken: res.body.ownerToken as string, fencingToken };
    held.add(lease);
    maxHeldSeen = Math.max(
      maxHeldSeen,
      [...held].reduce((n, h) => n + (h.keys?.length ?? 1), 0),
    );
    return lease;
  }

  const pathOf = (kind: Kind) => (kind === 'lock' ? 'locks' : kind === 'semaphore' ? 'semaphores' : 'rwlocks');

  async function renew(lease: Held): Promise<void> {
    const ttlMs = newTtl();
    const res =
      lease.kind === 'set'
        ? await post('/v1/lock-sets/renew', { keys: lease.keys, ownerToken: lease.ownerToken, ttlMs })
        : await post(`/v1/${pathOf(lease.kind)}/${lease.key}/renew`, { ownerToken: lease.ownerToken, ttlMs });
    note(`${lease.kind} renew`, res.status);
  }

  async function release(lease: Held): Promise<void> {
    held.delete(lease);
    const r = rand();
    if (lease.kind !== 'set' && r < 0.15 && lease.fencingToken !== undefined) {
      // An administrator's force release of this one lease.
      const res = await app.inject({
        method: 'DELETE',
        url: `/v1/${pathOf(lease.kind)}/${lease.key}?namespace=${NS}&fencingToken=${lease.fencingToken}`,
      });
      note(`${lease.kind} force`, res.statusCode);
      return;
    }
    if (lease.kind === 'set' && r < 0.3) {
      // One key of the set released alone through the lock route, then the set.
      const first = lease.keys?.[0] as string;
      note('set key release', (await post(`/v1/locks/${first}/release`, { ownerToken: lease.ownerToken })).status);
    }
    const res =
      lease.kind === 'set'
        ? await post('/v1/lock-sets/release', { keys: lease.keys, ownerToken: lease.ownerToken })
        : await post(`/v1/${pathOf(lease.kind)}/${lease.key}/release`, { ownerToken: lease.ownerToken });
    note(`${lease.kind} release`, res.status);
  }

  const deadline = performance.now() + options.durationMs;
  const kept: Held[][] = [];
  await Promise.all(
    Array.from({ length: options.workers }, async () => {
      const mine: Held[] = [];
      kept.push(mine);
      while (performance.now() < deadline) {
        const r = rand();
        if (mine.length > 0 && r < 0.45) {
          const lease = mine.splice(Math.floor(rand() * mine.length), 1)[0] as Held;
          if (rand() < 0.4) await renew(lease);
          await release(lease);
        } else {
          const lease = await acquire(pick<Kind>(['lock', 'lock', 'semaphore', 'semaphore', 'rwread', 'rwwrite', 'set']));
          if (lease) mine.push(lease);
        }
        expect(maxHeldSeen, 'leases answered 200 and not yet released, above the namespace limit').toBeLessThanOrEqual(limit);
      }
    }),
  );
  await options.quiescent?.([...held].reduce((n, h) => n + (h.keys?.length ?? 1), 0));
  await Promise.all(
    kept.map(async (mine) => {
      for (const lease of mine) await release(lease);
    }),
  );
  await options.released?.();
  if (options.noFill) return { statuses, maxHeldSeen, fill: -1 };
  // Every lease is released; every unit must be back. A fill of fresh locks gets exactly the limit.
  let fill = 0;
  for (let i = 0; i < limit + 5; i++) {
    const res = await post(`/v1/locks/fill-${i}/acquire`, { ttlMs: 60_000 });
    note('fill acquire', res.status);
    if (res.status === 200) fill++;
  }
  return { statuses, maxHeldSeen, fill };
}
