--[[
inspect: read the live lease on a lock, timed on the Redis clock. Read-only.
Includes _handover.lua (the live-waiter count); record and queue layout: see acquire.lua and
_handover.lua. The owner token is never returned.

KEYS[1]  the lock record
KEYS[2]  the lock's wait queue (ZSET)
KEYS[3]  the lock's waiter records (HASH)

Returns:
  {1, fencingToken, expiresAtMs, ttlRemainingMs, holder, waiters}   held; holder is "" when none was
                                                                    given; waiters counts live waiters only;
                                                                    a seventh element, the lease's release
                                                                    request (field r), when one was made
  {0, lastFencingToken, lockDelayLeftMs}                             free; the last token still kept (0 for
                                                                    none) and the lock-delay left (0 for none)
]]
--- @include "_handover"
makeQueueHelpers()

local cur = readLock(KEYS[1])
local expiresAt = tonumber(cur[2])
if not isLive(cur[1], expiresAt) then
  return {0, tonumber(cur[3]) or 0, lockDelayLeft(cur)}
end
if cur[10] then
  return {1, tonumber(cur[3]), expiresAt, expiresAt - nowMs, cur[5] or '', liveWaiters(KEYS, false), cur[10]}
end
return {1, tonumber(cur[3]), expiresAt, expiresAt - nowMs, cur[5] or '', liveWaiters(KEYS, false)}
