--[[
quota-free: give back a quota unit of the quota-slot calls (quota-reserve.lua): its lease was released, or
was never granted; or, with an end, retire it: its lease was force-released, so it is gone for good.

KEYS[1]  the count of the quota slot's shard (see _quota.lua)
KEYS[2]  the ends of the quota slot's shard
ARGV[1]  quota slot id
ARGV[2]  "" (or absent) to give the unit back; otherwise the end of the lease that is gone, Unix ms on the
         Redis clock: the unit is given back and its member stays, retired (_quota.lua), until that end.
         A renewal decided before the eviction may still send its quota-extend after this: that lease
         ended no later than this end, and a retired unit is neither moved nor counted again
         (quota-extend.lua). Without it, the unit counted again for a lease that no longer existed.

Returns:
  1   given back (retired too, with an end)
  0   no such unit (given back before, retired, or its second has ended); nothing given back (retired
      still, with an end)
]]
--- @include "_quota"

local member = 'u:' .. ARGV[1]
local known = tonumber(redis.call('ZSCORE', KEYS[2], member))
local counted = known and not quotaRetired(known)
if counted then
  quotaGive(KEYS[1], known)
end
local untilMs = tonumber(ARGV[2] or '')
if not untilMs then
  -- A plain give-back of a retired unit (the evicted holder's own release) leaves its mark in place.
  if counted then
    redis.call('ZREM', KEYS[2], member)
  end
  return counted and 1 or 0
end
if untilMs > nowMs then
  local second = quotaSecond(untilMs)
  -- Retired already (for a later end): kept as it is.
  if known and not counted and known > second then
    return 0
  end
  redis.call('ZADD', KEYS[2], second + 0.5, member)
  -- Both keys last until the retired unit's second has ended too (quotaCount keeps them so for counted ones).
  local latest = tonumber(redis.call('HGET', KEYS[1], 'x'))
  if not latest or second + 1 > latest then
    local keep = fmt((second + 1) * 1000 - nowMs + 1000)
    redis.call('HSET', KEYS[1], 'x', fmt(second + 1))
    redis.call('PEXPIRE', KEYS[1], keep)
    redis.call('PEXPIRE', KEYS[2], keep)
  end
elseif counted then
  -- The lease has ended already: nothing to keep from being counted again.
  redis.call('ZREM', KEYS[2], member)
end
return counted and 1 or 0
