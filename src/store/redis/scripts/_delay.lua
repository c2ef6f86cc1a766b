--[[
Shared include (not a command of its own): lock-delay. A lease granted with a lock-delay keeps it in
its record (field d = "ownerToken|ms", _lock.lua); when the lease EXPIRES (its owner field still set,
its end passed), the lock stays unavailable until end + ms. A release or force release deletes the
owner field, which ends the delay at once (and drops d). d names its lease's owner, so a d left over
from an earlier lease would never apply to a later one; a grant drops it all the same (a shorter
record). The fencing grace (how long the record outlives the lease) is never shorter than the longest
delay the service allows (config).
Uses nowMs from _common.lua and writeLock from _lock.lua. Defines:

  lockDelayLeft(cur) -> ms                     time left of an expired lease's lock-delay, 0 if none
  setLockDelay(lockKey, cur, owner, ms)        stores the delay of owner's lease (when ms > 0)
]]
local function lockDelayLeft(cur)
  local owner, endMs, d = cur[1], cur[2], cur[9]
  if not owner or not endMs or endMs > nowMs or not d then
    return 0
  end
  local of, ms = string.match(d, '^(.*)|(%d+)$')
  if of ~= owner then
    return 0
  end
  return math.max(0, endMs + tonumber(ms) - nowMs)
end

local function setLockDelay(lockKey, cur, owner, ms)
  if ms ~= '0' and ms + 0 > 0 then
    cur[9] = owner .. '|' .. ms
    writeLock(lockKey, cur)
  end
end
