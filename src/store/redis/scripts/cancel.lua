--[[
cancel: take a waiter out of the queue (its wait ran out or its caller left). If it was granted the
lock in the meantime, say so, so that the grant is either delivered or released, never lost.

KEYS[1]  the lock record
KEYS[2]  the lock's wait queue (ZSET)
KEYS[3]  the lock's waiter records (HASH)
KEYS[4]  the count of the lock's quota shard (see _quota.lua)
KEYS[5]  the ends of the lock's quota shard: a waiter that holds nothing gives its unit back
ARGV[1]  waiter id
ARGV[2]  the waiter's owner token

Returns:
  {0, retryAfterMs}                removed from the queue (or already gone); it holds nothing.
                                   retryAfterMs: time left on the current lease, 0 when free
  {1, fencingToken, expiresAtMs}   it was already granted the lock and holds a live lease
]]
--- @include "_lock"
--- @include "_quota"

local record = redis.call('HGET', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
local wasQueued = redis.call('ZREM', KEYS[2], ARGV[1]) == 1
local cur = readLock(KEYS[1])
local expiresAt = tonumber(cur[2])
local live = isLive(cur[1], expiresAt)
if not wasQueued and live and cur[1] == ARGV[2] then
  return {1, tonumber(cur[3]), expiresAt}
end
-- Its unit, if it took one, given back from the second it was counted in.
local second = record and waiterUnitSecond(record)
if second then
  quotaGive(KEYS[4], second)
end
-- The caller's "retry after": when the lease it waited behind (or the one that took its place) ends.
if live then
  return {0, expiresAt - nowMs}
end
return {0, 0}
