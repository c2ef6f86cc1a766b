--[[
Shared include (not a command of its own): lock-delay. A lease granted with a lock-delay keeps it in
its hash (field d, ms); when the lease EXPIRES (its owner field still set, its end passed), the lock
stays unavailable until end + d. A release or force release deletes the owner field, which ends the
delay at once; every grant deletes d (grantLease) before setting its own. The fencing grace (how long
the hash outlives the lease) is never shorter than the longest delay the service allows (config).
Uses nowMs from _common.lua. Defines:

  lockDelayLeft(lockKey, owner, endMs) -> ms   time left of an expired lease's lock-delay, 0 if none
  setLockDelay(lockKey, ms)                    stores the delay of the lease just granted (ms > 0)
]]
local function lockDelayLeft(lockKey, owner, endMs)
  if not owner or not endMs or endMs > nowMs then
    return 0
  end
  local d = tonumber(redis.call('HGET', lockKey, 'd'))
  if not d then
    return 0
  end
  return math.max(0, endMs + d - nowMs)
end

local function setLockDelay(lockKey, ms)
  if tonumber(ms) > 0 then
    redis.call('HSET', lockKey, 'd', ms)
  end
end
