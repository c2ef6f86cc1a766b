--[[
permit-release: end one live lease of a semaphore or read/write lock, only for its owner, and hand the
freed room to the head of the queue (as many waiters, in order, as now fit). Keys: see _permits.lua.

KEYS[1..4] pool hash, wait queue, waiter records, lease ends
ARGV[1]  owner token
ARGV[2]  fencing grace, ms
ARGV[3]  grant channel prefix
ARGV[4]  the key's name (for hand-over messages)

Returns:
  1   released
  0   this token holds no live lease; nothing changed
]]
--- @include "_handover"
--- @include "_permits"

prunePermits(KEYS)
-- A record is trusted only while its lease has not ended: pruning finds ended leases through the lease
-- ends, and those may have expired before the pool hash (emptied and made anew with a shorter TTL), so an
-- ended lease's record can outlive them. Released, it took its weight off the live leases' room.
local weight, _, expiresAt = permitRecord(KEYS, ARGV[1])
if not weight or expiresAt <= nowMs then
  return 0
end
redis.call('HDEL', KEYS[1], 'o:' .. ARGV[1], 'r:' .. ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('HSET', KEYS[1], 'u', fmt(math.max(0, (tonumber(redis.call('HGET', KEYS[1], 'u')) or 0) - weight)))
permitChanged(KEYS, ARGV[3])
handOverPermits(KEYS, tonumber(ARGV[2]), ARGV[3], ARGV[4])
return 1
