--[[
quota-free: give back a quota unit of the quota-slot calls (quota-reserve.lua): its lease was released, or
was never granted.

KEYS[1]  the count of the quota slot's shard (see _quota.lua)
KEYS[2]  the ends of the quota slot's shard
ARGV[1]  quota slot id

Returns:
  1   given back
  0   no such unit (given back before, or its second has ended); nothing changed
]]
--- @include "_quota"

local member = 'u:' .. ARGV[1]
local known = redis.call('ZSCORE', KEYS[2], member)
if not known then
  return 0
end
quotaGive({KEYS[1], KEYS[2]}, tonumber(known))
redis.call('ZREM', KEYS[2], member)
return 1
