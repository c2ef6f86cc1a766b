import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';

/**
 * A Redis lock record (src/store/redis/scripts/_lock.lua: one string in a compact binary layout) seen and
 * planted as the hash it replaced: field name -> value as digits or text. Read and written by the
 * scripts' own readLock and writeLock (the files themselves, so this never drifts from them), which also
 * read the layouts before (a lock hash, a cmsgpack record).
 */
const lua = (name: string) => readFileSync(new URL(`../../src/store/redis/scripts/${name}`, import.meta.url), 'utf8');
const FIELDS = `${lua('_common.lua')}
${lua('_lock.lua')}
-- cur's positions (readLock): o, e, t, i, h, q, w, b, d, r.
local NAMES = {'o', 'e', 't', 'i', 'h', 'q', 'w', 'b', 'd', 'r'}
local v = readLock(KEYS[1])`;

const READ = `${FIELDS}
local out = {}
for pos = 1, 10 do
  if v[pos] ~= nil then
    out[#out + 1] = NAMES[pos]
    out[#out + 1] = type(v[pos]) == 'number' and string.format('%.0f', v[pos]) or v[pos]
  end
end
return out`;

// ARGV: name, value pairs; value '' drops the field. Numbers stay numbers (as the scripts write them).
const WRITE = `${FIELDS}
local NUMBERS = {t = true, e = true, b = true, q = true, w = true}
for a = 1, #ARGV, 2 do
  for pos = 1, 10 do
    if NAMES[pos] == ARGV[a] then
      local value = ARGV[a + 1]
      if value == '' then
        v[pos] = nil
      elseif NUMBERS[ARGV[a]] then
        v[pos] = tonumber(value)
      else
        v[pos] = value
      end
    end
  end
end
redis.call('SET', KEYS[1], packLock(v), 'KEEPTTL')
return 1`;

/**
 * The cmsgpack record of the version before the compact one: the fields packed one value after another in
 * the order t, e, o, b, q, w, d, h, i, r (trailing absent ones left out), as that version's packLock wrote
 * them. Keeps the expiry.
 */
const TO_MSGPACK = `${FIELDS}
local p = {v[3] or nil, v[2] or nil, v[1] or nil, v[8] or nil, v[6] or nil, v[7] or nil, v[9] or nil, v[5] or nil, v[4] or nil, v[10] or nil}
local n = 10
while n > 0 and p[n] == nil do
  n = n - 1
end
redis.call('SET', KEYS[1], n == 0 and '' or cmsgpack.pack(unpack(p, 1, n)), 'KEEPTTL')
return n`;

/** Every field of the lock record at `key` ({} when there is none). */
export async function lockFields(redis: Redis, key: string): Promise<Record<string, string>> {
  const flat = (await redis.eval(READ, 1, key)) as string[];
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[flat[i] as string] = flat[i + 1] as string;
  return out;
}

/** One field of the lock record at `key`, or null (as HGET answers). */
export async function lockField(redis: Redis, key: string, field: string): Promise<string | null> {
  return (await lockFields(redis, key))[field] ?? null;
}

/** Sets (or, with null, drops) fields of the lock record at `key`, keeping its expiry. */
export async function setLockFields(redis: Redis, key: string, fields: Record<string, string | null>): Promise<void> {
  await redis.eval(WRITE, 1, key, ...Object.entries(fields).flatMap(([name, value]) => [name, value ?? '']));
}

/**
 * Rewrites the lock record at `key` as the hash the versions before the packed record kept: the same
 * fields (numbers as digits), the same expiry. The scripts still read such a hash (_lock.lua readLock).
 */
export async function toLockHash(redis: Redis, key: string): Promise<void> {
  const fields = await lockFields(redis, key);
  const ttl = await redis.pttl(key);
  await redis.del(key);
  if (Object.keys(fields).length > 0) await redis.hset(key, fields);
  if (ttl > 0) await redis.pexpire(key, ttl);
}

/**
 * Rewrites the lock record at `key` as the cmsgpack record of the version before the compact one (same
 * fields, same expiry). The scripts still read it (_lock.lua readLock).
 */
export async function toMsgpackRecord(redis: Redis, key: string): Promise<void> {
  await redis.eval(TO_MSGPACK, 1, key);
}

/** Whether the lock record at `key` is in the compact layout (its first byte a tag in 0x80-0x9f). */
export async function isCompactRecord(redis: Redis, key: string): Promise<boolean> {
  const raw = await redis.getBuffer(key);
  return raw !== null && raw.length > 0 && raw[0]! >= 0x80 && raw[0]! <= 0x9f;
}
