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
ARGV[5]  instance id of the caller's keyholder, "" for none: a waiter of that instance handed the lock
         is answered from this reply, not sent a hand-over message
ARGV[6]  ARGV[1]'s 16 bytes as 32 hex digits, "" for a token kept as given (knowOwner, _lock.lua)

Returns:
  1   released (and handed over if someone was queued; the waiter's instance told by message)
  {1, waiterId, fencingToken, expiresAtMs}
      released and handed to waiterId, a waiter of the caller's instance (ARGV[5]); no message sent
  0   this token holds no live lease (expired, released, taken, unknown); nothing changed
]]
--- @include "_handover"
--- @include "_quota"

knowOwner(ARGV[1], ARGV[6])
local cur = readLock(KEYS[1])
local expiresAt = cur[2]
if cur[1] ~= ARGV[1] or not isLive(cur[1], expiresAt) then
  return 0
end

-- Tested here, not in quotaGive: a lease that took no unit (0) then makes no quota call (1.7k fewer Redis
-- instructions per acquire + release pair counted that way: callgrind, 300 pairs).
local unit = unitSecond(cur)
if unit ~= 0 then
  quotaGive(KEYS[4], unit)
end
local graceMs = ARGV[2] + 0
freeLease(KEYS[1], cur, graceMs)
publishChange(ARGV[3], ARGV[4], cur)
local selfInstance = ARGV[5] ~= '' and ARGV[5] or nil
local id, token, leaseEnd, told = handOverFree(KEYS, cur, graceMs, ARGV[3], ARGV[4], selfInstance)
if id and not told then
  return {1, id, token, leaseEnd}
end
return 1
