--[[
inspect: read the live lease on a lock, timed on the Redis clock. Read-only.
Hash layout: see acquire.lua. The owner token is never returned.

KEYS[1]  the lock hash
KEYS[2]  the lock's wait queue (ZSET)

Returns:
  {1, fencingToken, expiresAtMs, ttlRemainingMs, holder, waiters}   held; holder is "" when none was given
  {0}                                                      free
]]
local now = redis.call('TIME')
local nowMs = math.floor((tonumber(now[1]) * 1000000 + tonumber(now[2])) / 1000)

local cur = redis.call('HMGET', KEYS[1], 'o', 'e', 't', 'h')
local expiresAt = tonumber(cur[2])
if not cur[1] or not expiresAt or expiresAt <= nowMs then
  return {0}
end
return {1, tonumber(cur[3]), expiresAt, expiresAt - nowMs, cur[4] or '', redis.call('ZCARD', KEYS[2])}
