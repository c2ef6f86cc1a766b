--[[
lock-delay: give a lease that was handed over to a waiter the lock-delay its caller asked for (a waiter's
record does not carry it; the waiter's instance sets it right after confirming the hand-over).

KEYS[1]  the lock record
ARGV[1]  owner token
ARGV[2]  lock-delay, ms (> 0)

Returns:
  1   set
  0   this token holds no live lease; nothing changed
]]
--- @include "_lock"
--- @include "_delay"

local cur = readLock(KEYS[1])
if cur[1] ~= ARGV[1] or not isLive(cur[1], tonumber(cur[2])) then
  return 0
end
setLockDelay(KEYS[1], cur, ARGV[1], ARGV[2])
return 1
