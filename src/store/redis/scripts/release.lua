--[[
release: free a live lease, only for its owner, and hand the lock to the first live waiter.
The last fencing token stays in the hash (for the grace period), so the next grant is numbered above
it even inside the same microsecond. Record layout: see acquire.lua.

KEYS[1]  the lock record
KEYS[2]  the lock's wait queue (ZSET)
KEYS[3]  the lock's waiter records (HASH)
KEYS[4]  the count of the lock's quota shard (see _quota.lua)
KEYS[5]  the ends of the lock's quota shard: the lease's unit is given back
ARGV[1]  owner token
ARGV[2]  fencing grace, ms
ARGV[3]  grant channel prefix
ARGV[4]  lock name (for the hand-over message)

Returns:
  1   released (and handed over if someone was queued)
  0   this token holds no live lease (expired, released, taken, unknown); nothing changed
]]
--- @include "_handover"
--- @include "_quota"

local cur = readLock(KEYS[1])
local expiresAt = tonumber(cur[2])
if cur[1] ~= ARGV[1] or not isLive(cur[1], expiresAt) then
  return 0
end

quotaGive({KEYS[4], KEYS[5]}, unitSecond(cur))
freeLease(KEYS[1], cur, tonumber(ARGV[2]))
publishChange(ARGV[3], ARGV[4], cur)
handOverFree(KEYS, cur, tonumber(ARGV[2]), ARGV[3], ARGV[4])
return 1
