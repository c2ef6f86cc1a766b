--[[
quota-add: count one quota unit without a cap (moving a deployment to the sharded layout counts the
leases it carries over; see migrate-layout.ts). Layout: see _quota.lua.

KEYS[1]  the count of the quota shard
KEYS[2]  the ends of the quota shard
ARGV[1]  the unit's end, Unix ms
ARGV[2]  "" for a lock's unit (counted by its end, as the lock scripts do); otherwise the quota slot id of a
         unit of the quota-slot calls (quota-reserve.lua), recorded as "u:" .. id

Returns:
  1   counted
  0   its end has passed, or the quota slot id is counted already; nothing changed
]]
--- @include "_quota"

local endMs = tonumber(ARGV[1])
-- Only a whole number of ms below 2^53: fmt (%d) prints an infinite, NaN or 2^63-and-above value as
-- -2^63, and a PEXPIRE of that would delete the shard, every unit counted in it.
if not endMs or endMs ~= math.floor(endMs) or endMs >= 9007199254740992 then
  error('quota-add: the end is not a whole number of ms')
end
if endMs <= nowMs or (ARGV[2] ~= '' and redis.call('ZSCORE', KEYS[2], 'u:' .. ARGV[2])) then
  return 0
end
local second = quotaSecond(endMs)
quotaAdd(KEYS[1], KEYS[2], second)
if ARGV[2] ~= '' then
  redis.call('ZADD', KEYS[2], second, 'u:' .. ARGV[2])
end
return 1
