--[[
force-release: free a live lease whoever holds it (an administrator's override). Like release.lua
it keeps the last fencing token (for the grace period), so the next grant is numbered above the
evicted one; and the evicted owner token is gone, so it can no longer renew or release.
If callers are queued, the lock goes to the first of them, as on release.
Record layout: see acquire.lua.

KEYS[1]  the lock record
KEYS[2]  the lock's wait queue (ZSET)
KEYS[3]  the lock's waiter records (HASH)
KEYS[4]  the count of the lock's quota shard (see _quota.lua)
KEYS[5]  the ends of the lock's quota shard: the evicted lease's unit is given back
ARGV[1]  fencing grace, ms
ARGV[2]  grant channel prefix
ARGV[3]  lock name (for the hand-over message)
ARGV[4]  the fencing token of the lease to evict, or "" for whichever is live: with a token, a live
         lease with another token (the holder changed since the caller looked) is left alone

Returns:
  {1, fencingToken, holder, evictedOwnerToken, expiresAtMs, unitHere}
         released; holder is "" when none was given; expiresAtMs the evicted lease's end (its quota slot,
         if it has one, is retired until then: quota-free.lua); unitHere 1 when its quota unit was counted
         here (and is given back now), 0 when it took none here (field b = 0: a lock set's key, or a cap
         counted through the quota-slot calls), so its quota slot is for the caller to give back
  {0}    no live lease (or not the one named); nothing changed
]]
--- @include "_handover"
--- @include "_quota"

local cur = readLock(KEYS[1])
if not isLive(cur[1], tonumber(cur[2])) then
  return {0}
end
if ARGV[4] ~= '' and tonumber(cur[3]) ~= tonumber(ARGV[4]) then
  return {0}
end

local owner, holder, token, expiresAt = cur[1], cur[5] or '', tonumber(cur[3]), tonumber(cur[2])
-- Tested here, not in quotaGive, as in release.lua: a lease that took no unit (0) makes no quota call.
local unit = unitSecond(cur)
if unit ~= 0 then
  quotaGive(KEYS[4], unit)
end
freeLease(KEYS[1], cur, tonumber(ARGV[1]))
publishChange(ARGV[2], ARGV[3], cur)
handOverFree(KEYS, cur, tonumber(ARGV[1]), ARGV[2], ARGV[3])
return {1, token, holder, owner, expiresAt, unit ~= 0 and 1 or 0}
