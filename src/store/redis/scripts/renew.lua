--[[
renew: extend a live lease, only for its owner. The fencing token does not change.
Hash layout: see acquire.lua.

KEYS[1]  the lock hash
KEYS[2]  the quota slots of the lock's namespace (see acquire.lua): the lease's slot, if it has one,
         lasts as long as the lease now does
ARGV[1]  owner token
ARGV[2]  new lease length from now, ms (integer > 0)
ARGV[3]  fencing grace, ms

Returns:
  {1, fencingToken, expiresAtMs}   renewed
  {0}                              this token holds no live lease (expired, released, taken, unknown)
]]
--- @include "_lock"

local cur = readLock(KEYS[1])
local expiresAt = tonumber(cur[2])
if cur[1] ~= ARGV[1] or not isLive(cur[1], expiresAt) then
  return {0}
end

local ttl = tonumber(ARGV[2])
local newExpiresAt = nowMs + ttl
redis.call('HSET', KEYS[1], 'e', fmt(newExpiresAt))
keepLock(KEYS[1], ttl + tonumber(ARGV[3]), cur)
if redis.call('ZADD', KEYS[2], 'XX', 'GT', 'CH', newExpiresAt, ARGV[1]) == 1 and redis.call('PTTL', KEYS[2]) < ttl then
  redis.call('PEXPIRE', KEYS[2], ttl + 1000)
end
return {1, tonumber(cur[3]), newExpiresAt}
