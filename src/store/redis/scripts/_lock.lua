--[[
Shared include (not a command of its own): the lock record as the lock scripts read and write it. Pulled
in by _handover.lua and by the renew scripts. Uses nowMs, fmt and the library locals (call, floor, ceil, max,
pack, unpackRecord) from _common.lua.

A lock is ONE string key, its fields in a compact binary record, so that a plain held lock fits the
smallest string Redis can keep it in. A string value of up to 28 bytes lives inside the key's own
object in one 48-byte allocation (an embedded string: 16 B object, 3 B header, the bytes, a NUL); from
29 to 44 bytes it takes 64. The record (struct, big-endian):

  tag     1 byte   0x80 + flags: 16 the token follows; 1 a lease (owner and end) follows; 2 its owner
                   token is 16 raw bytes (one of the service's own: 22 base64url characters, decoded),
                   else 2-byte length + the token as given; 4 the end is absolute (7 bytes), else 4 bytes
                   signed: ms after the token's own ms (token / 1000, floored); 8 more fields follow
  t       7 bytes  last fencing token issued (below 2^53)
  o       16 bytes, or 2 + its length
  e       4 bytes (relative to t), or 7 (absolute, Unix ms)
  rest    cmsgpack values in the order b, q, w, d, h, i, r, trailing absent ones left out

A plain held lock (token, end within 24 days of its token's ms, the service's owner token) is 28 bytes;
a free lock keeping its last token 8. One SET ... PX writes the record and its expiry together. The tag
sits in 0x80-0x9f, which no record of the two layouts before ever starts with: a lock hash (WRONGTYPE on
GET) and the cmsgpack record of the version before (its first value a number or nil) are read as they
were, and the script's next write stores the compact record in their place. The versions before fail
on a compact record (an unreadable record: 503), never read it as a lease.

Defines:
  readLock(lockKey) -> cur      the record in one GET: cur[1] o, cur[2] e, cur[3] t, cur[4] i, cur[5] h,
                                cur[6] q, cur[7] w, cur[8] b, cur[9] d, cur[10] r (nil when absent; the meaning
                                of each: acquire.lua). A lock hash or cmsgpack record of the versions before is
                                read as it was (its fields); the next write replaces it. Scripts that change the
                                record update cur and write it once with writeLock. An owner without an end (or
                                an end without an owner) is no lease and is not kept. cur[11], cur[12]: the
                                owner token's 16 bytes as stored and the text they read as (when stored so).
  writeLock(lockKey, cur, ms)   SET the record, kept ms from now but never less than q or w need (the
                                fields that announce a queue or a watcher must last as long as what they
                                announce); ms nil keeps the expiry as it is
  queuedNow(cur)                whether the lock's wait queue may exist: without q in the future, nobody
                                looks at the queue (a plain acquire or release costs no queue command)
  watchedNow(cur)               whether an instance watches the lock (w in the future): change notices
                                are published only then (_watch.lua)
  unitSecond(cur) -> second     the second the live lease's quota unit is counted in (_quota.lua): its
                                end's, or field b for a lease a hand-over granted (its unit was taken
                                when it queued, counted to the end of its wait plus its lease); 0 (field
                                b = 0) for a lease that took no unit here, its quota counted around the
                                lock scripts (the quota-slot calls): it gives back and moves nothing
  knowOwner(text, hex)          the caller's owner token and its 16 bytes as 32 hex digits, worked out by
                                the caller (src/store/redis/owner-bytes.ts; "" for a token kept as given):
                                converting that token either way is then a comparison, not 22 character
                                steps in Lua (the plain acquire and release pair would pay both)
]]
-- The caller's owner token and its bytes (knowOwner): nil when not given; bytes false for a token kept
-- as given.
local knownText, knownBytes

local function knowOwner(text, hex)
  knownText = text
  if hex == '' then
    knownBytes = false
    return
  end
  -- A function library keeps the bytes (kept, _common.lua): a lease's release (and renew) comes with the
  -- token its acquire converted.
  local bytes = kept and kept[hex]
  if not bytes then
    -- Three integers of 48, 40 and 40 bits: a double holds each exactly.
    bytes = pack('>I6I5I5', tonumber(string.sub(hex, 1, 12), 16), tonumber(string.sub(hex, 13, 22), 16),
      tonumber(string.sub(hex, 23, 32), 16))
    if kept then
      keepValue(hex, bytes)
    end
  end
  knownBytes = bytes
end

-- The 16 bytes an owner token of the service encodes (22 base64url characters, no padding, as
-- newOwnerToken makes them), or nil for any other token: those are kept as given. Only a token that
-- reads back exactly (its last character's 4 spare bits 0) is decoded. The caller's own token comes
-- decoded (knowOwner); the rest runs for any other token (a waiter granted by a hand-over). No tables
-- (with ownerText, 10-13 us of Redis time per decode and encode against 19-28 with tables, at a load
-- average of 11).
local function ownerBytes(o)
  if o == knownText then
    return knownBytes or nil
  end
  if #o ~= 22 or string.find(o, '[^%w_-]') then
    return nil
  end
  -- The 6-bit value of a base64url character code (checked above to be one). Made here, not with the
  -- top-level helpers: only a token other than the caller's gets this far, and each top-level helper is
  -- a closure made on every run.
  local v = function(c)
    if c >= 97 then
      return c - 71
    elseif c >= 65 then
      if c == 95 then
        return 63
      end
      return c - 65
    elseif c >= 48 then
      return c + 4
    end
    return 62
  end
  local c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20, c21, c22 =
    string.byte(o, 1, 22)
  local v22 = v(c22)
  if v22 % 16 ~= 0 then
    return nil
  end
  local floor = math.floor
  local n1 = v(c1) * 262144 + v(c2) * 4096 + v(c3) * 64 + v(c4)
  local n2 = v(c5) * 262144 + v(c6) * 4096 + v(c7) * 64 + v(c8)
  local n3 = v(c9) * 262144 + v(c10) * 4096 + v(c11) * 64 + v(c12)
  local n4 = v(c13) * 262144 + v(c14) * 4096 + v(c15) * 64 + v(c16)
  local n5 = v(c17) * 262144 + v(c18) * 4096 + v(c19) * 64 + v(c20)
  return string.char(floor(n1 / 65536), floor(n1 / 256) % 256, n1 % 256, floor(n2 / 65536), floor(n2 / 256) % 256,
    n2 % 256, floor(n3 / 65536), floor(n3 / 256) % 256, n3 % 256, floor(n4 / 65536), floor(n4 / 256) % 256, n4 % 256,
    floor(n5 / 65536), floor(n5 / 256) % 256, n5 % 256, v(c21) * 4 + v22 / 16)
end

-- The owner token that ownerBytes decoded into 16 bytes: the caller's own without converting (knowOwner),
-- any other by the 22 character steps (a read of a lock another owner holds).
local function ownerText(bytes)
  if bytes == knownBytes then
    return knownText
  end
  local B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
  local b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15, b16 = string.byte(bytes, 1, 16)
  local c, floor = string.byte, math.floor
  local n1 = b1 * 65536 + b2 * 256 + b3
  local n2 = b4 * 65536 + b5 * 256 + b6
  local n3 = b7 * 65536 + b8 * 256 + b9
  local n4 = b10 * 65536 + b11 * 256 + b12
  local n5 = b13 * 65536 + b14 * 256 + b15
  return string.char(
    c(B64, floor(n1 / 262144) + 1), c(B64, floor(n1 / 4096) % 64 + 1), c(B64, floor(n1 / 64) % 64 + 1), c(B64, n1 % 64 + 1),
    c(B64, floor(n2 / 262144) + 1), c(B64, floor(n2 / 4096) % 64 + 1), c(B64, floor(n2 / 64) % 64 + 1), c(B64, n2 % 64 + 1),
    c(B64, floor(n3 / 262144) + 1), c(B64, floor(n3 / 4096) % 64 + 1), c(B64, floor(n3 / 64) % 64 + 1), c(B64, n3 % 64 + 1),
    c(B64, floor(n4 / 262144) + 1), c(B64, floor(n4 / 4096) % 64 + 1), c(B64, floor(n4 / 64) % 64 + 1), c(B64, n4 % 64 + 1),
    c(B64, floor(n5 / 262144) + 1), c(B64, floor(n5 / 4096) % 64 + 1), c(B64, floor(n5 / 64) % 64 + 1), c(B64, n5 % 64 + 1),
    c(B64, floor(b16 / 4) + 1), c(B64, (b16 % 4) * 16 + 1))
end

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
    -- Made with room for the fields a grant sets (1-5, 8-10): filled one by one, an empty table is grown
    -- (rehashed) three times or more; setting a field to nil adds its key too.
    return {nil, nil, nil, nil, nil, nil, nil, nil, nil, nil}
  end
  local tag = string.byte(raw, 1)
  if tag == 0x93 and #raw == 28 then
    -- The common case, a plain held lock: token, owner token's bytes, end relative to the token.
    local _, t, bytes, delta = unpackRecord('>BI7c16i4', raw)
    local o = ownerText(bytes)
    -- cur[11], cur[12]: the owner token's bytes and the text they read as, so a write that keeps the owner
    -- (renew, a mark, a request) packs them again without converting the token back.
    return {o, floor(t / 1000) + delta, t, nil, nil, nil, nil, nil, nil, nil, bytes, o}
  end
  if tag < 0x80 or tag > 0x9f then
    -- A record of the version before the compact one (cmsgpack values in the order t, e, o, b, q, w, d,
    -- h, i, r), read as it was.
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
  local pos, t, o, e, bytes = 2, nil, nil, nil, nil
  if bit.band(tag, 16) ~= 0 then
    t, pos = struct.unpack('>I7', raw, pos)
  end
  if bit.band(tag, 1) ~= 0 then
    local n = 16
    if bit.band(tag, 2) == 0 then
      n, pos = struct.unpack('>I2', raw, pos)
    end
    o = string.sub(raw, pos, pos + n - 1)
    if #o ~= n then
      error('lock record unreadable: ' .. lockKey)
    end
    pos = pos + n
    if bit.band(tag, 2) ~= 0 then
      bytes, o = o, ownerText(o)
    end
    if bit.band(tag, 4) ~= 0 then
      e, pos = struct.unpack('>I7', raw, pos)
    elseif t then
      local delta
      delta, pos = struct.unpack('>i4', raw, pos)
      e = math.floor(t / 1000) + delta
    else
      error('lock record unreadable: ' .. lockKey)
    end
  end
  if bit.band(tag, 8) == 0 then
    if pos ~= #raw + 1 then
      error('lock record unreadable: ' .. lockKey)
    end
    return {o, e, t, nil, nil, nil, nil, nil, nil, nil, bytes, bytes and o}
  end
  local b, q, w, d, h, i, r, extra = cmsgpack.unpack(string.sub(raw, pos))
  if extra ~= nil or (b and type(b) ~= 'number') or (q and type(q) ~= 'number') or (w and type(w) ~= 'number')
      or (d and type(d) ~= 'string') or (h and type(h) ~= 'string') or (i and type(i) ~= 'string')
      or (r and type(r) ~= 'string') then
    error('lock record unreadable: ' .. lockKey)
  end
  return {o, e, t, i, h, q, w, b, d, r, bytes, bytes and o}
end

local function packLock(cur)
  local o, e, t = cur[1], cur[2], cur[3]
  local more = cur[4] or cur[5] or cur[6] or cur[7] or cur[8] or cur[9] or cur[10]
  if t and not (o and e) and not more then
    -- A free lock keeping its last token (a release): 8 bytes, the tag and the token, in one pack.
    return pack('>BI7', 0x90, t)
  end
  local delta = (t and e) and e - floor(t / 1000) or nil
  local near = delta and delta >= -2147483648 and delta <= 2147483647
  local bytes = o and (o == cur[12] and cur[11] or ownerBytes(o))
  if not more and near and bytes then
    -- A plain held lock: 28 bytes (see the header), no table built.
    return pack('>BI7c16i4', 0x93, t, bytes, delta)
  end
  if not (t or (o and e) or more) then
    -- Nothing to keep; the key still expires as asked.
    return ''
  end
  local tag, body = 0x80, ''
  if t then
    tag, body = tag + 16, pack('>I7', t)
  end
  if o and e then
    tag = tag + 1
    if bytes then
      tag, body = tag + 2, body .. bytes
    elseif #o <= 65535 then
      body = body .. struct.pack('>I2', #o) .. o
    else
      error('owner token too long')
    end
    if near then
      body = body .. struct.pack('>i4', delta)
    else
      tag, body = tag + 4, body .. struct.pack('>I7', e)
    end
  end
  if more then
    -- "or nil": an absent field is never packed as false.
    local v = {cur[8] or nil, cur[6] or nil, cur[7] or nil, cur[9] or nil, cur[5] or nil, cur[4] or nil, cur[10] or nil}
    local n = 7
    while v[n] == nil do
      n = n - 1
    end
    tag, body = tag + 8, body .. cmsgpack.pack(unpack(v, 1, n))
  end
  return string.char(tag) .. body
end

local function writeLock(lockKey, cur, ms)
  if ms == nil then
    call('SET', lockKey, packLock(cur), 'KEEPTTL')
    return
  end
  local q, w, keep = cur[6], cur[7], ms
  if q or w then
    keep = max(ms, (q or 0) - nowMs, (w or 0) - nowMs)
  end
  call('SET', lockKey, packLock(cur), 'PX', fmt(keep >= 1 and keep or 1))
end

local function queuedNow(cur)
  return (cur[6] or 0) > nowMs
end

local function watchedNow(cur)
  return (cur[7] or 0) > nowMs
end

local function unitSecond(cur)
  return cur[8] or ceil(cur[2] / 1000)
end
