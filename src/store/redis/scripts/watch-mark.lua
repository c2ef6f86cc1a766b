--[[
watch-mark: an instance subscribed to a lock's change notices marks the lock as watched for keepMs more
(and again, while it stays subscribed, before the mark runs out), so the lock scripts publish its
changes (_watch.lua) and skip the PUBLISH for locks nobody watches. Record layout: see acquire.lua.

KEYS[1]  the lock record (created, with only the mark, when the lock has none)
ARGV[1]  keepMs: how long the mark lasts from now

Returns:
  1   the lock was marked already (no change can have gone unannounced)
  0   it was not (first mark, or the mark ran out): changes since then were not announced
]]
--- @include "_lock"

local cur = readLock(KEYS[1])
local wasWatched = watchedNow(cur)
local keep = tonumber(ARGV[1])
cur[7] = math.max(tonumber(cur[7]) or 0, nowMs + keep)
-- The lease's own life (end plus grace) is at least what the record has left now (none: a lock
-- without a record gets one with only the mark).
local pttl = redis.call('PTTL', KEYS[1])
writeLock(KEYS[1], cur, math.max(pttl, 0))
if wasWatched then
  return 1
end
return 0
