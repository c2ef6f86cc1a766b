--[[
renew: extend a live lease, only for its owner. The fencing token does not change.
Hash layout: see acquire.lua.

KEYS[1]  the lock hash
ARGV[1]  owner token
ARGV[2]  new lease length from now, ms (integer > 0)
ARGV[3]  fencing grace, ms

Returns:
  {1, fencingToken, expiresAtMs}   renewed
  {0}                              this token holds no live lease (expired, released, taken, unknown)
]]
local cur = redis.call('HMGET', KEYS[1], 'o', 'e', 't')
local expiresAt = tonumber(cur[2])
if cur[1] ~= ARGV[1] or not isLive(cur[1], expiresAt) then
  return {0}
end

local ttl = tonumber(ARGV[2])
local newExpiresAt = nowMs + ttl
redis.call('HSET', KEYS[1], 'e', fmt(newExpiresAt))
redis.call('PEXPIRE', KEYS[1], ttl + tonumber(ARGV[3]))
return {1, tonumber(cur[3]), newExpiresAt}
