--[[
inspect: read the live lease on a lock, timed on the Redis clock. Read-only.
Uses the _handover.lua prelude (clock, live-waiter count); hash and queue layout: see acquire.lua and
_handover.lua. The owner token is never returned.

KEYS[1]  the lock hash
KEYS[2]  the lock's wait queue (ZSET)
KEYS[3]  the lock's waiter records (HASH)

Returns:
  {1, fencingToken, expiresAtMs, ttlRemainingMs, holder, waiters}   held; holder is "" when none was
                                                                    given; waiters counts live waiters only
  {0}                                                               free
]]
local nowMs = now()

local cur = redis.call('HMGET', KEYS[1], 'o', 'e', 't', 'h')
local expiresAt = tonumber(cur[2])
if not cur[1] or not expiresAt or expiresAt <= nowMs then
  return {0}
end
return {1, tonumber(cur[3]), expiresAt, expiresAt - nowMs, cur[4] or '', liveWaiters(KEYS, nowMs, false)}
