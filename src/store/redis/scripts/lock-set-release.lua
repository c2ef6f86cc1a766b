--[[
lock-set-release: free every lock of a set that the set's owner token still holds, and hand each to its
first live waiter. Release keeps each lock's last fencing token for the grace period (as release.lua).

KEYS[5i-4] .. KEYS[5i]   lock i's hash, wait queue (ZSET), waiter records (HASH) and quota shard (count,
                         ends: a waiter dropped from the queue gives its unit back there), i = 1..n
ARGV[1]      owner token of the set
ARGV[2]      fencing grace, ms
ARGV[3]      grant channel prefix
ARGV[3 + i]  lock i's name (for messages)

Returns:
  1   released (every lock this token held)
  0   this token held none of the locks; nothing changed
]]
--- @include "_handover"

local graceMs = tonumber(ARGV[2])
local released = 0
for i = 1, #KEYS / 5 do
  local keys = {KEYS[5 * i - 4], KEYS[5 * i - 3], KEYS[5 * i - 2], KEYS[5 * i - 1], KEYS[5 * i]}
  local cur = readLock(keys[1])
  if cur[1] == ARGV[1] and isLive(cur[1], tonumber(cur[2])) then
    freeLease(keys[1], cur, graceMs)
    publishChange(ARGV[3], ARGV[3 + i], cur)
    handOverFree(keys, cur, graceMs, ARGV[3], ARGV[3 + i])
    released = 1
  end
end
return released
