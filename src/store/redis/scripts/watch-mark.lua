--[[
watch-mark: an instance subscribed to a lock's change notices marks the lock as watched for keepMs more
(and again, while it stays subscribed, before the mark runs out), so the lock scripts publish its
changes (_watch.lua) and skip the PUBLISH for locks nobody watches. Hash layout: see acquire.lua.

KEYS[1]  the lock hash (created, with only the mark, when the lock has none)
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
redis.call('HSET', KEYS[1], 'w', fmt(cur[7]))
-- The lease's own life (end plus grace) is at least what the hash has now; a hash without a TTL was
-- just created here.
local pttl = redis.call('PTTL', KEYS[1])
keepLock(KEYS[1], math.max(pttl, 0), cur)
if wasWatched then
  return 1
end
return 0
