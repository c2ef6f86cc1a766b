--[[
quota-extend: count an existing quota unit of the quota-slot calls (quota-reserve.lua) to a later end (after
a grant or a renewal), so it lasts as long as the lease it counts. Never creates a unit and never
moves one earlier.

KEYS[1]  the count of the quota slot's shard (see _quota.lua)
KEYS[2]  the ends of the quota slot's shard
ARGV[1]  quota slot id
ARGV[2]  new quota slot end, Unix ms on the Redis clock

Returns:
  1   the unit exists (it is now counted at least to ARGV[2])
  0   no such unit; nothing changed
]]
--- @include "_quota"

local member = 'u:' .. ARGV[1]
local known = tonumber(redis.call('ZSCORE', KEYS[2], member))
if not known then
  return 0
end
local second = quotaSecond(tonumber(ARGV[2]))
if second > known then
  quotaMove({KEYS[1], KEYS[2]}, known, second)
  redis.call('ZADD', KEYS[2], second, member)
end
return 1
