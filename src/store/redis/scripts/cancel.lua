--[[
cancel: take a waiter out of the queue (its wait ran out or its caller left). If it was granted the
lock in the meantime, say so, so that the grant is either delivered or released, never lost.

KEYS[1]  the lock hash
KEYS[2]  the lock's wait queue (ZSET)
KEYS[3]  the lock's waiter records (HASH)
ARGV[1]  waiter id
ARGV[2]  the waiter's owner token

Returns:
  {0}                              removed from the queue (or already gone); it holds nothing
  {1, fencingToken, expiresAtMs}   it was already granted the lock and holds a live lease
]]
redis.call('HDEL', KEYS[3], ARGV[1])
if redis.call('ZREM', KEYS[2], ARGV[1]) == 1 then
  return {0}
end
local cur = redis.call('HMGET', KEYS[1], 'o', 'e', 't')
local expiresAt = tonumber(cur[2])
if cur[1] == ARGV[2] and isLive(cur[1], expiresAt) then
  return {1, tonumber(cur[3]), expiresAt}
end
return {0}
