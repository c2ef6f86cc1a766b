import type { Redis } from 'ioredis';
import { defineScripts } from './scripts.js';
import { type RedisClient } from './client.js';
import { KeySpace, QUOTA_INSIDE_FROM } from './keys.js';
import { dataNodes } from './nodes.js';

/**
 * Moves a deployment's Redis data from the layout before shards (every key of a namespace tagged
 * `{ns}`, the quota one sorted set `slots:{ns}` with a member per lease) to the sharded one (keys.ts,
 * _quota.lua). Run with every keyholder instance stopped (docs/operations.md): nothing else writes
 * meanwhile, so each key is read, written under its new name with the time it had left, and deleted.
 *
 * - Lock hashes and permit pools (with their ends) keep every field: owner tokens, lease ends, fencing
 *   tokens, holder labels, lock-delays. A holder renews and releases with the token it has. A lock stays
 *   a hash under its new name: the lock scripts read it as it is and write it back as the compact lock
 *   record (scripts/_lock.lua).
 * - Wait queues and waiter records are dropped: their callers were connected to the stopped instances,
 *   which answered them when they stopped. The `q` field that announced a queue goes with them.
 * - The quota: every live member of the old sorted sets is counted again, in the new shards: a plain
 *   lock's lease inside its own shard when the limit is counted inside the lock scripts, any other unit
 *   (semaphore and read/write leases, lock sets, a small limit) as a quota-slot-call unit named as before.
 */
export interface MigrationReport {
  readonly locks: number;
  readonly permitKeys: number;
  readonly queuesDropped: number;
  readonly quotaUnits: number;
}

/** Kinds of per-lock keys in both layouts: '' a lock hash; then queues, waiters, permit pools and their parts. */
const MOVED_KINDS = new Set(['', 's', 'se', 'r', 're']);
const DROPPED_KINDS = new Set(['q', 'w', 'sq', 'sw', 'rq', 'rw']);

interface OldKey {
  readonly redisKey: string;
  readonly group: string;
  readonly kind: string;
  /** The lock id the key belongs to (`group/name`, or `group` alone). */
  readonly id: string;
}

/** Reads an old-layout key name (`P{group}kind/name` or `P{group}kind`); null for anything else. */
function parseOld(prefix: string, redisKey: string): OldKey | null {
  const head = `${prefix}{`;
  if (!redisKey.startsWith(head)) return null;
  const close = redisKey.indexOf('}', head.length);
  if (close < 0) return null;
  const group = redisKey.slice(head.length, close);
  if (group === '' || /[{}/#]/.test(group)) return null; // '#': already sharded
  const tail = redisKey.slice(close + 1);
  const slash = tail.indexOf('/');
  const kind = slash < 0 ? tail : tail.slice(0, slash);
  const id = slash < 0 ? group : `${group}/${tail.slice(slash + 1)}`;
  return MOVED_KINDS.has(kind) || DROPPED_KINDS.has(kind) ? { redisKey, group, kind, id } : null;
}

async function scanAll(node: Redis, pattern: string): Promise<string[]> {
  const out: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    out.push(...keys);
  } while (cursor !== '0');
  return out;
}

/** The new name of an old permit or lock key of `kind`. */
function newName(keys: KeySpace, old: OldKey): string {
  if (old.kind === '') return keys.lock(old.id);
  const letter = old.kind[0] === 's' ? 'semaphore' : 'rwlock';
  const permit = keys.permitKeys(letter, old.id);
  return old.kind.length === 1 ? permit.pool : permit.expiries;
}

/**
 * Moves every old-layout key under `prefix`. `maxHeldLocksPerNamespace`: the quota limit the new
 * instances will run with (NAMESPACE_MAX_HELD_LOCKS; 0: no quota, nothing counted).
 */
export async function migrateLayout(client: RedisClient, prefix: string, maxHeldLocksPerNamespace: number): Promise<MigrationReport> {
  const keys = new KeySpace(prefix);
  const scripts = defineScripts(client);
  const inside = maxHeldLocksPerNamespace >= QUOTA_INSIDE_FROM;
  const glob = prefix.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
  let locks = 0;
  let permitKeys = 0;
  let queuesDropped = 0;
  let quotaUnits = 0;
  /** Owner token -> the plain lock it holds (its unit is counted in the lock's shard when inside). */
  const lockOf = new Map<string, { id: string; endMs: number }>();
  const oldSlotSets: string[] = [];
  for (const node of dataNodes(client)) {
    for (const redisKey of await scanAll(node, `${glob}slots:{*`)) oldSlotSets.push(redisKey);
    for (const redisKey of await scanAll(node, `${glob}{*`)) {
      const old = parseOld(prefix, redisKey);
      if (!old) continue;
      if (DROPPED_KINDS.has(old.kind)) {
        await client.del(redisKey);
        queuesDropped++;
        continue;
      }
      const ttl = await client.pttl(redisKey);
      const target = newName(keys, old);
      if (old.kind === 'se' || old.kind === 're') {
        const members = await client.zrange(redisKey, 0, -1, 'WITHSCORES');
        // ZRANGE answers member, score; ZADD takes score, member.
        const pairs: string[] = [];
        for (let i = 0; i + 1 < members.length; i += 2) pairs.push(members[i + 1] as string, members[i] as string);
        if (pairs.length > 0) await client.zadd(target, ...pairs);
      } else {
        const fields = await client.hgetall(redisKey);
        delete fields.q;
        // A quota counted around the lock scripts (a cap below QUOTA_INSIDE_FROM): the lease holds a unit of
        // the quota-slot calls (counted below), none of the lock scripts', and says so (field b = 0,
        // acquire.lua), so that its release gives back none of theirs.
        // Counted inside them, only a plain lock's own unit is counted in its shard (below, where the mark is
        // taken off again); a lock set's key holds quota-slot units ("<owner>.<i>") and stays marked.
        const liveLock = old.kind === '' && fields.o && Number(fields.e) > Date.now();
        if (liveLock && maxHeldLocksPerNamespace > 0) fields.b = '0';
        if (Object.keys(fields).length > 0) await client.hset(target, fields);
        if (liveLock) lockOf.set(fields.o as string, { id: old.id, endMs: Number(fields.e) });
      }
      if (ttl > 0) await client.pexpire(target, ttl);
      await client.del(redisKey);
      if (old.kind === '') locks++;
      else permitKeys++;
    }
  }
  for (const setKey of oldSlotSets) {
    const namespace = setKey.slice(`${prefix}slots:{`.length, -1);
    const members = await client.zrange(setKey, 0, -1, 'WITHSCORES');
    for (let i = 0; i + 1 < members.length && maxHeldLocksPerNamespace > 0; i += 2) {
      const member = members[i] as string;
      const endMs = Number(members[i + 1]);
      const lock = inside ? lockOf.get(member) : undefined;
      const counted = lock
        ? await scripts.run('quotaAdd', { quota: keys.lockKeys(lock.id).quota, endMs: lock.endMs, quotaSlotId: '' })
        : await scripts.run('quotaAdd', { quota: keys.quotaFor(namespace, member, maxHeldLocksPerNamespace), endMs, quotaSlotId: member });
      // A plain lock whose unit is counted in its own shard gives it back itself: no mark.
      if (lock) await client.hdel(keys.lock(lock.id), 'b');
      if (counted === 1) quotaUnits++;
    }
    await client.del(setKey);
  }
  return { locks, permitKeys, queuesDropped, quotaUnits };
}
