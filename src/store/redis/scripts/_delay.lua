--[[
Shared include (not a command of its own): lock-delay. A lease granted with a lock-delay keeps it in
its hash (field d = "ownerToken|ms"); when the lease EXPIRES (its owner field still set, its end
passed), the lock stays unavailable until end + ms. A release or force release deletes the owner
field, which ends the delay at once. d names its lease's owner, so a d left over from an earlier lease
never applies to a later one (no grant has to delete it). The fencing grace (how long the hash
outlives the lease) is never shorter than the longest delay the service allows (config).
Uses nowMs from _common.lua. Defines:

  lockDelayLeft(lockKey, owner, endMs) -> ms   time left of an expired lease's lock-delay, 0 if none
  setLockDelay(lockKey, owner, ms)             stores the delay of owner's lease (when ms > 0)
]]
local function lockDelayLeft(lockKey, owner, endMs)
  if not owner or not endMs or endMs > nowMs then
    return 0
  end
  local d = redis.call('HGET', lockKey, 'd')
  if not d then
    return 0
  end
  local of, ms = string.match(d, '^(.*)|(%d+)$')
  if of ~= owner then
    return 0
  end
  return math.max(0, endMs + tonumber(ms) - nowMs)
end

local function setLockDelay(lockKey, owner, ms)
  if tonumber(ms) > 0 then
    redis.call('HSET', lockKey, 'd', owner .. '|' .. ms)
  end
end
