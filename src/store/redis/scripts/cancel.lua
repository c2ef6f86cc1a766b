--[[
cancel: take a waiter out of the queue (its wait ran out or its caller left). If it was granted the
lock in the meantime, say so, so that the grant is either delivered or released, never lost.

KEYS[1]  the lock hash
KEYS[2]  the lock's wait queue (ZSET)
KEYS[3]  the lock's waiter records (HASH)
KEYS[4]  the quota slots of the lock's namespace (see acquire.lua): a waiter that holds nothing gives its slot back
ARGV[1]  waiter id
ARGV[2]  the waiter's owner token

Returns:
  {0, retryAfterMs}                removed from the queue (or already gone); it holds nothing.
                                   retryAfterMs: time left on the current lease, 0 when free
  {1, fencingToken, expiresAtMs}   it was already granted the lock and holds a live lease
]]
redis.call('HDEL', KEYS[3], ARGV[1])
local wasQueued = redis.call('ZREM', KEYS[2], ARGV[1]) == 1
local cur = redis.call('HMGET', KEYS[1], 'o', 'e', 't')
local expiresAt = tonumber(cur[2])
local live = isLive(cur[1], expiresAt)
if not wasQueued and live and cur[1] == ARGV[2] then
  return {1, tonumber(cur[3]), expiresAt}
end
redis.call('ZREM', KEYS[4], ARGV[2])
-- The caller's "retry after": when the lease it waited behind (or the one that took its place) ends.
if live then
  return {0, expiresAt - nowMs}
end
return {0, 0}
