--[[
queue: the first live callers queued for a lock, a semaphore or a read/write lock, in queue order, as
inspect shows them (like the Web Locks API's query()). Read-only; never returns owner tokens or waiter ids.
Queue layout: see _handover.lua (locks) and _permits.lua (semaphores, read/write locks).

KEYS[1]  the lock record or the pool hash (unused: it names the key's Cluster slot)
KEYS[2]  the wait queue (ZSET: waiter id by arrival time, us)
KEYS[3]  the waiter records (HASH)
ARGV[1]  the most callers to return
ARGV[2]  "lock" or "permit": the waiter record's layout

Returns:
  {holder1, arrivedUs1, weight1, holder2, ...}   holder "" when none was given; weight 0 for a lock
]]
--- @include "_handover"
makeQueueHelpers()

local limit = tonumber(ARGV[1])
local reply = {}
local queued = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
for i = 1, #queued, 2 do
  if #reply >= limit * 3 then
    break
  end
  local record = redis.call('HGET', KEYS[3], queued[i])
  if record and waiterLive(record) then
    if ARGV[2] == 'lock' then
      reply[#reply + 1] = string.match(record, '^[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|(.*)$') or ''
      reply[#reply + 1] = queued[i + 1]
      reply[#reply + 1] = 0
    else
      local weight, holder = string.match(record, '^[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|(%d+)|[^|]*|(.*)$')
      reply[#reply + 1] = holder or ''
      reply[#reply + 1] = queued[i + 1]
      reply[#reply + 1] = tonumber(weight) or 0
    end
  end
end
return reply
