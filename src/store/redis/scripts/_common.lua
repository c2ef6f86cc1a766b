--[[
Shared prelude (not a command of its own): prepended to every script, so each reads the clock the same
way, once, and tests a lease the same way. Defines:

  call, floor, ceil, max, format, pack, unpackRecord
                          redis.call, math.floor, math.ceil, math.max, string.format, struct.pack and
                          struct.unpack as locals, for the lock pair's paths: a global is two table reads
                          per use (three in a function library, whose globals are an empty table reading
                          through to Redis's: function_lua.c), a local one register or upvalue read
  nowMs, nowUs            the Redis clock, read once per script: Unix ms and us
  fmt(n) -> string        an integer as digits (tostring would use exponent form)
  kept, keepValue(k, v)   what a function library keeps between calls (see fmt); nil in an EVAL script
  isLive(owner, endMs)    whether a lock record's owner (field o) and lease end (field e, a number or nil)
                          describe a live lease: an owner, and an end after now

Scripts that may hand a lock to a waiter also include _handover.lua (see its header).
]]
local call, floor, ceil, max, format, pack, unpackRecord
-- Read at the script's start; in the function library (src/store/redis/scripts.ts) at its first call,
-- once: the library's top level runs where only its loading API is there.
do
  call, floor, ceil, max = redis.call, math.floor, math.ceil, math.max
  format, pack, unpackRecord = string.format, struct.pack, struct.unpack
end

local nowMs, nowUs
do
  local t = call('TIME')
  nowUs = t[1] * 1000000 + t[2]
  nowMs = floor(nowUs / 1000)
end

-- %d, not %.0f: the C library prints a double through its arbitrary-precision path for %.0f (about
-- twice the cost); every number the scripts format is an integer below 2^53, which %d (a 64-bit long
-- here) prints the same. The function library (src/store/redis/scripts.ts) keeps what it worked out
-- between calls (kept, by what it was worked out from; at most 256 values at once, then it starts
-- again): the digits of a number, and an owner token's bytes (knowOwner, _lock.lua). The lock pair
-- formats the same few numbers again and again (the second a lease ends in, its count, the record's
-- expiry), and the release of a lease converts the token its acquire did; a table read is a fraction
-- of either's cost. An EVAL script keeps nothing (kept nil): each of its runs would start empty.
local kept, keptCount

local function keepValue(key, value)
  if keptCount == 256 then
    kept, keptCount = {}, 0
  end
  kept[key], keptCount = value, keptCount + 1
end

local function fmt(n)
  local s = kept and kept[n]
  if s then
    return s
  end
  s = format('%d', n)
  if kept then
    keepValue(n, s)
  end
  return s
end

local function isLive(owner, endMs)
  if not owner or not endMs then
    return false
  end
  return endMs > nowMs
end
