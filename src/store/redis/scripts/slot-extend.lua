--[[
slot-extend: move an existing quota slot's end later (after a grant or a renewal), so the slot lasts
as long as the lease it counts. Never creates a slot and never moves one earlier.
Set layout: see slot-reserve.lua.

KEYS[1]  the namespace's slot set
ARGV[1]  slot id
ARGV[2]  new slot end, Unix ms on the Redis clock

Returns:
  1   the slot exists (its end is now at least ARGV[2])
  0   no such slot; nothing changed
]]
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', 'GT', ARGV[2], ARGV[1])
local latest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[1], math.max(1, tonumber(latest[2]) - nowMs))
return 1
