--[[
quota-extend: count a quota unit of the quota-slot calls (quota-reserve.lua) to a later end, after its
lease was granted or renewed: the unit moves there (never earlier), and a missing unit is counted again,
with no cap. The lease it counts is held, so it must count: its unit goes missing when a release fails
but the unit's give-back sent with it does not, and the lease lives on (see QuotaSlotStore).

KEYS[1]  the count of the quota slot's shard (see _quota.lua)
KEYS[2]  the ends of the quota slot's shard
ARGV[1]  quota slot id
ARGV[2]  new quota slot end, Unix ms on the Redis clock

Returns:
  1   the unit was counted; it now counts at least to ARGV[2]
  0   the unit was missing (or no longer counted); it is counted again, to ARGV[2] (if that has not passed)
  2   the unit is retired (quota-free.lua with an end): its lease was force-released, and this renewal was
      decided before that; nothing is moved or counted (the lease no longer exists)
]]
--- @include "_quota"

local member = 'u:' .. ARGV[1]
local known = tonumber(redis.call('ZSCORE', KEYS[2], member))
local endMs = tonumber(ARGV[2])
if known and quotaRetired(known) then
  return 2
end
if known and known * 1000 >= endMs then
  return 1
end
if endMs <= nowMs then
  -- The lease has ended already: nothing to count (and a past second must not set the keys' expiry).
  return known and 1 or 0
end
local second = quotaSecond(endMs)
-- Still counted at its second: moved. Otherwise (missing, or its second already swept or given back) the
-- unit is counted anew.
local counted = known and quotaGive(KEYS[1], known)
quotaAdd(KEYS[1], KEYS[2], second)
redis.call('ZADD', KEYS[2], second, member)
return counted and 1 or 0
