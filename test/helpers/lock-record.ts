import type { Redis } from 'ioredis';

/**
 * A Redis lock record (src/store/redis/scripts/_lock.lua: one string, its fields packed with cmsgpack in
 * the order t, e, o, b, q, w, d, h, i, r) seen and planted as the hash it replaced: field name -> value as
 * digits or text. Decoded by Redis's own cmsgpack, the one the scripts pack with.
 */
const FIELDS = `local NAMES = {'t', 'e', 'o', 'b', 'q', 'w', 'd', 'h', 'i', 'r'}
local raw = redis.call('GET', KEYS[1])
local v = {}
if raw and raw ~= '' then
  v = {cmsgpack.unpack(raw)}
end`;

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
local n = 0
for pos = 1, 10 do
  if v[pos] ~= nil then
    n = pos
  end
end
local packed = n == 0 and '' or cmsgpack.pack(unpack(v, 1, n))
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('SET', KEYS[1], packed, 'KEEPTTL')
else
  redis.call('SET', KEYS[1], packed)
end
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
