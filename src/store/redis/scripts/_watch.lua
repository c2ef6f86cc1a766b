--[[
Shared include (not a command of its own): announces changes of a lock to its watchers. Pulled in by
_handover.lua (so by every script that may grant or free a lock). Uses nowMs from _common.lua.
Defines:

  publishChange(channelPrefix, name, cur)   PUBLISH "" on channelPrefix .. 'changed:' .. name when the
                                       lock (read as cur) is watched (watchedNow, _lock.lua), at most
                                       once per name per script run (a release that hands the lock on is
                                       one notice: the watchers read the final state); without cur, the
                                       same PUBLISH without the watched test (permits: their watchers
                                       are not marked, so every change is announced)

The channel prefix is the grant channel prefix the scripts already get (instance ids never contain
':', so a change channel is never an instance's grant channel). Each keyholder instance subscribes
once per watched key and fans out in process (src/domain/watch.ts): one PUBLISH per change, whatever
the number of watchers. An instance that subscribes marks the lock record as watched (field w, kept
ahead while it stays subscribed: watch-mark.lua), so a lock nobody watches costs no
PUBLISH. An expiry is not announced (nothing runs then): watchers time it.
]]
-- Made at the first notice: most runs announce nothing, and a table per run is not free.
local publishedChanges
-- One helper, the watched test written out (watchedNow): a plain acquire or release, which calls it
-- once, makes one closure for it, not three.
local function publishChange(channelPrefix, name, cur)
  if cur and (cur[7] or 0) <= nowMs then
    return
  end
  publishedChanges = publishedChanges or {}
  if publishedChanges[name] then
    return
  end
  publishedChanges[name] = true
  redis.call('PUBLISH', channelPrefix .. 'changed:' .. name, '')
end
