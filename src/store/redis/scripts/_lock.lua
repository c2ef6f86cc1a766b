--[[
Shared include (not a command of its own): the lock hash as the lock scripts read it, in ONE HMGET, and
how long the hash is kept. Pulled in by _handover.lua and by the renew scripts. Uses nowMs and fmt from
_common.lua. Defines:

  readLock(lockKey) -> cur      the hash's fields (layout: acquire.lua): cur[1] o, cur[2] e, cur[3] t,
                                cur[4] i, cur[5] h, cur[6] q, cur[7] w (nil when absent). Scripts that
                                change the hash update cur, so nothing is read twice.
  queuedNow(cur)                whether the lock's wait queue may exist: without q in the future, nobody
                                looks at the queue (a plain acquire or release costs no queue command)
  watchedNow(cur)               whether an instance watches the lock (w in the future): change notices
                                are published only then (_watch.lua)
  keepLock(lockKey, ms, cur)    PEXPIRE the hash ms from now, but never before q or w: the fields that
                                announce a queue or a watcher must last as long as what they announce
]]
local function readLock(lockKey)
  return redis.call('HMGET', lockKey, 'o', 'e', 't', 'i', 'h', 'q', 'w')
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
