--[[
renew: extend a live lease, only for its owner. The fencing token does not change.
Record layout: see acquire.lua.

KEYS[1]  the lock record
KEYS[2]  the count of the lock's quota shard (see _quota.lua): the lease's unit, if it has one, is
         counted to the lease's new end
KEYS[3]  the ends of the lock's quota shard
ARGV[1]  owner token
ARGV[2]  new lease length from now, ms (integer > 0)
ARGV[3]  fencing grace, ms
ARGV[4]  ARGV[1]'s 16 bytes as 32 hex digits, "" for a token kept as given (knowOwner, _lock.lua)

Returns:
  {1, fencingToken, expiresAtMs}   renewed
  {1, fencingToken, expiresAtMs, releaseRequest}
                                   renewed, and its holder was asked to let go (field r, request-release.lua)
  {2, ...}                         renewed, as {1, ...}; the lease took no unit here (field b = 0: a lock
                                   set's key, or a cap counted through the quota-slot calls), so its
                                   quota slot is for the caller to carry to the new end
  {0}                              this token holds no live lease (expired, released, taken, unknown)
]]
--- @include "_lock"
--- @include "_quota"

knowOwner(ARGV[1], ARGV[4])
local cur = readLock(KEYS[1])
-- readLock gives the record's numbers as numbers: no tonumber (two strtod each in Lua 5.1).
local expiresAt = cur[2]
if cur[1] ~= ARGV[1] or not isLive(cur[1], expiresAt) then
  return {0}
end

local ttl = ARGV[2] + 0
local newExpiresAt = nowMs + ttl
-- The lease's quota unit (if counted) moves to its new end's second; field b (a waiter's unit) is then done.
-- A lease that took no unit here (b = 0) moves none, and stays so.
local from, to = unitSecond(cur), math.ceil(newExpiresAt / 1000)
if from ~= 0 then
  quotaMove(KEYS[2], KEYS[3], from, to)
  cur[8] = nil
end
cur[2] = newExpiresAt
writeLock(KEYS[1], cur, ttl + ARGV[3])
local renewed = from ~= 0 and 1 or 2
if cur[10] then
  return {renewed, cur[3], newExpiresAt, cur[10]}
end
return {renewed, cur[3], newExpiresAt}
