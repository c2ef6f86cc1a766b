--[[
Shared include (not a command of its own): the lock record as the lock scripts read and write it. Pulled
in by _handover.lua and by the renew scripts. Uses nowMs and fmt from _common.lua.

A lock is ONE string key: its fields packed with cmsgpack, one MessagePack value after another, in the
order of RECORD (the fields every held lock has first, so a record ends at its last field present and
absent ones at the end cost nothing). A plain held lock (fencing token, lease end, 22-character owner
token) packs into 41 bytes, under the 44 that Redis keeps inside the key's own object (an embedded
string): 64 bytes of value, where the hash this replaces took a listpack plus an object (about 24 B
more per held lock, docs/performance.md). One SET ... PX writes the record and its expiry together.

Defines:
  readLock(lockKey) -> cur      the record in one GET: cur[1] o, cur[2] e, cur[3] t, cur[4] i, cur[5] h,
                                cur[6] q, cur[7] w, cur[8] b, cur[9] d, cur[10] r (nil when absent; the meaning
                                of each: acquire.lua). A lock hash written before the packed record is read as it
                                was (its fields); the next write replaces it. Scripts that change the
                                record update cur and write it once with writeLock.
  writeLock(lockKey, cur, ms)   SET the record, kept ms from now but never less than q or w need (the
                                fields that announce a queue or a watcher must last as long as what they
                                announce); ms nil keeps the expiry as it is
  queuedNow(cur)                whether the lock's wait queue may exist: without q in the future, nobody
                                looks at the queue (a plain acquire or release costs no queue command)
  watchedNow(cur)               whether an instance watches the lock (w in the future): change notices
                                are published only then (_watch.lua)
  unitSecond(cur) -> second     the second the live lease's quota unit is counted in (_quota.lua): its
                                end's, or field b for a lease a hand-over granted (its unit was taken
                                when it queued, counted to the end of its wait plus its lease)
]]
local function readLock(lockKey)
  local raw = redis.pcall('GET', lockKey)
  if type(raw) == 'table' then
    -- WRONGTYPE: a lock hash of the layout before the packed record. Read as it was: nothing is lost
    -- across the upgrade, and the script's next write stores the record in its place.
    local old = redis.call('HMGET', lockKey, 'o', 'e', 't', 'i', 'h', 'q', 'w', 'b', 'd')
    local cur = {}
    for k = 1, 9 do
      cur[k] = old[k] or nil
    end
    -- The hash kept numbers as digits.
    for _, k in ipairs({2, 3, 6, 7, 8}) do
      cur[k] = tonumber(cur[k])
    end
    return cur
  end
  if not raw or raw == '' then
    return {}
  end
  -- Packed in the order t, e, o, b, q, w, d, h, i, r (written out, not looked up in a table: this runs in
  -- every lock script).
  local t, e, o, b, q, w, d, h, i, r, extra = cmsgpack.unpack(raw)
  if extra ~= nil or (t and type(t) ~= 'number') or (e and type(e) ~= 'number') or (o and type(o) ~= 'string')
      or (b and type(b) ~= 'number') or (q and type(q) ~= 'number') or (w and type(w) ~= 'number')
      or (d and type(d) ~= 'string') or (h and type(h) ~= 'string') or (i and type(i) ~= 'string')
      or (r and type(r) ~= 'string') then
    -- Not a record these scripts wrote: fail the call (503) rather than read a lease into it.
    error('lock record unreadable: ' .. lockKey)
  end
  return {o, e, t, i, h, q, w, b, d, r}
end

local function packLock(cur)
  if not (cur[4] or cur[5] or cur[6] or cur[7] or cur[8] or cur[9] or cur[10]) then
    -- A held lock without options, or a free one keeping its last token: no table built.
    if cur[1] then
      return cmsgpack.pack(cur[3], cur[2], cur[1])
    elseif cur[3] and not cur[2] then
      return cmsgpack.pack(cur[3])
    end
  end
  -- "or nil": an absent field is never packed as false.
  local v = {cur[3] or nil, cur[2] or nil, cur[1] or nil, cur[8] or nil, cur[6] or nil, cur[7] or nil, cur[9] or nil,
    cur[5] or nil, cur[4] or nil, cur[10] or nil}
  local n = 10
  while n > 0 and v[n] == nil do
    n = n - 1
  end
  if n == 0 then
    -- Nothing to keep (cmsgpack.pack wants at least one value); the key still expires as asked.
    return ''
  end
  return cmsgpack.pack(unpack(v, 1, n))
end

local function writeLock(lockKey, cur, ms)
  if ms == nil then
    redis.call('SET', lockKey, packLock(cur), 'KEEPTTL')
    return
  end
  local keep = math.max(1, ms, (tonumber(cur[6]) or 0) - nowMs, (tonumber(cur[7]) or 0) - nowMs)
  redis.call('SET', lockKey, packLock(cur), 'PX', fmt(keep))
end

local function queuedNow(cur)
  return (tonumber(cur[6]) or 0) > nowMs
end

local function watchedNow(cur)
  return (tonumber(cur[7]) or 0) > nowMs
end

local function unitSecond(cur)
  return tonumber(cur[8]) or math.ceil(tonumber(cur[2]) / 1000)
end
