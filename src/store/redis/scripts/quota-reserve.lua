--[[
quota-reserve: take one unit of a namespace's quota for a lease kept by the quota-slot calls (semaphores,
read/write locks, lock sets), if its quota shard has one free. The unit counts in the same shard
counts as the lock scripts' (_quota.lua), named by its quota slot id so quota-extend and quota-free find it:
member "u:" .. quota slot id of the shard's ends set, score the second it is counted to. A unit that is
never given back stops counting when its second ends.

KEYS[1]  the count of the quota slot's shard (see _quota.lua)
KEYS[2]  the ends of the quota slot's shard
ARGV[1]  quota slot id
ARGV[2]  quota slot length from now, ms (integer > 0)
ARGV[3]  most units the shard may count at once: the namespace's limit over the shards, rounded up

Returns:
  {1}                 reserved (or the quota slot already existed; its end moves later, never earlier)
  {0, retryAfterMs}   the shard is full; retryAfterMs = time until its earliest counted second ends (>= 1)
]]
--- @include "_quota"

local member = 'u:' .. ARGV[1]
local second = quotaSecond(nowMs + tonumber(ARGV[2]))
local known = tonumber(redis.call('ZSCORE', KEYS[2], member))
-- A retired unit (quota-free.lua) counts nowhere: a slot asked for under its id is taken anew.
if known and not quotaRetired(known) then
  if second > known then
    quotaMove(KEYS[1], KEYS[2], known, second)
    redis.call('ZADD', KEYS[2], second, member)
  end
  return {1}
end
local full = quotaTake(KEYS[1], KEYS[2], nowMs + tonumber(ARGV[2]), tonumber(ARGV[3]))
if full then
  return {0, full}
end
redis.call('ZADD', KEYS[2], second, member)
return {1}
