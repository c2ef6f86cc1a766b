--[[
Shared include (not a command of its own): the lock hash as the lock scripts read it, in ONE HMGET, and
how long the hash is kept. Pulled in by _handover.lua and by the renew scripts. Uses nowMs and fmt from
_common.lua. Defines:

  readLock(lockKey) -> cur      the hash's fields (layout: acquire.lua): cur[1] o, cur[2] e, cur[3] t,
                                cur[4] i, cur[5] h, cur[6] q, cur[7] w, cur[8] b (nil when absent). Scripts that
                                change the hash update cur, so nothing is read twice.
  queuedNow(cur)                whether the lock's wait queue may exist: without q in the future, nobody
                                looks at the queue (a plain acquire or release costs no queue command)
  watchedNow(cur)               whether an instance watches the lock (w in the future): change notices
                                are published only then (_watch.lua)
  keepLock(lockKey, ms, cur)    PEXPIRE the hash ms from now, but never before q or w: the fields that
                                announce a queue or a watcher must last as long as what they announce
  unitSecond(cur) -> second     the second the live lease's quota unit is counted in (_quota.lua): its
                                end's, or field b for a lease a hand-over granted (its unit was taken
                                when it queued, counted to the end of its wait plus its lease)
]]
local function readLock(lockKey)
  return redis.call('HMGET', lockKey, 'o', 'e', 't', 'i', 'h', 'q', 'w', 'b')
end

local function queuedNow(cur)
  return (tonumber(cur[6]) or 0) > nowMs
end

local function watchedNow(cur)
  return (tonumber(cur[7]) or 0) > nowMs
end

local function keepLock(lockKey, ms, cur)
  redis.call('PEXPIRE', lockKey, math.max(ms, (tonumber(cur[6]) or 0) - nowMs, (tonumber(cur[7]) or 0) - nowMs))
end

local function unitSecond(cur)
  return tonumber(cur[8]) or math.ceil(tonumber(cur[2]) / 1000)
end
