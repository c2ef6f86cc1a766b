--[[
Shared prelude (not a command of its own): prepended to every script, so each reads the clock the same
way, once, and tests a lease the same way. Defines:

  nowMs, nowUs            the Redis clock, read once per script: Unix ms and us
  fmt(n) -> string        an integer as digits (tostring would use exponent form)
  isLive(owner, endMs)    whether a lock record's owner (field o) and lease end (field e, a number or nil)
                          describe a live lease: an owner, and an end after now

Scripts that may hand a lock to a waiter also include _handover.lua (see its header).
]]
local nowMs, nowUs
do
  local t = redis.call('TIME')
  nowUs = t[1] * 1000000 + t[2]
  nowMs = math.floor(nowUs / 1000)
end

-- %d, not %.0f: the C library prints a double through its arbitrary-precision path for %.0f (about
-- twice the cost); every number the scripts format is an integer below 2^53, which %d (a 64-bit long
-- here) prints the same.
local function fmt(n)
  return string.format('%d', n)
end

local function isLive(owner, endMs)
  if not owner or not endMs then
    return false
  end
  return endMs > nowMs
end
