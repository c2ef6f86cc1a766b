--[[
Shared include (not a command of its own): the namespace quota, one shard of it. A namespace's quota
is split over QUOTA_SHARDS shards (src/store/redis/keys.ts); a lock counts in the shard its keys live
in, so the lock scripts take and give its unit in the same atomic step as the grant or release. Each
shard admits at most ceil(limit / shards) units (the caller passes that cap); docs/limits.md states
what this bounds. Uses nowMs, fmt, call, ceil and max from _common.lua.

A shard keeps COUNTS, not one entry per lease, so a held lock costs the quota no memory of its own:
  count  HASH  n = units counted; m = the earliest counted second (absent when none); x = the latest;
               "<second>" = units that end in that second (second = ceil(end ms / 1000))
  ends   ZSET  member "<second>", score second: the counted seconds in order, so ended ones are
               found without a scan; member "u:<unit id>", score its second: a unit taken through the
               quota-slot calls (quota-reserve.lua), whose caller names it by id rather than by its end;
               a score half a second past a whole second marks such a unit retired (quotaRetired): given
               back for a lease that is gone for good, counted nowhere, kept until that second ends so that
               no call made for the gone lease counts it again (quota-free.lua, quota-extend.lua)
A unit counts until the end of its second unless given back first; a take first drops the seconds
that have ended (only when m says one has), so a lease that expires without a release stops counting
within a second of its end. Both keys live until the latest counted second ends (plus a second).

Defines:
  quotaSecond(endMs) -> second
  quotaTake(count, ends, endMs, cap) -> nil, or retryAfterMs when the shard holds cap units
  quotaAdd(count, ends, second)  counts one unit in second (no cap: a renewal or a move)
  quotaGive(count, second) -> given  gives back one unit counted in second, if that second is still counted
  quotaMove(count, ends, fromSecond, toSecond)
  quotaRetired(score) -> whether a quota-slot unit's score marks it retired
  waiterUnitSecond(record) -> the second a lock waiter's unit is counted in, nil when it took none
where count and ends are the shard's two keys (no table of them: the lock pair builds none).
]]
-- A lock waiter's unit is counted to the end of its wait plus its lease (acquire.lua), read from its waiter
-- record ("aliveUntil|deadline|ttl|..."): nil when the record says it took none (a length led by a 0) or does
-- not read so. Where the waiter's cancel (cancel.lua) and its drop from the queue (_handover.lua) give it back.
local function waiterUnitSecond(record)
  local deadline, ttl = string.match(record, '^%d+|(%d+)|(%d+)|')
  if deadline and string.byte(ttl, 1) ~= 48 then
    return math.ceil((tonumber(deadline) + tonumber(ttl)) / 1000)
  end
  return nil
end

local function quotaSecond(endMs)
  return math.ceil(endMs / 1000)
end

-- Counted units have whole seconds as scores; a retired one, its second and a half (quota-free.lua).
local function quotaRetired(score)
  return score % 1 ~= 0
end

-- Drops the ended seconds (at most 1000 per call; the rest on the next) and returns the units left,
-- and the earliest counted second left (nil when none).
local function quotaSweep(count, ends, n)
  local nowSec = math.floor(nowMs / 1000)
  local ended = redis.call('ZRANGE', ends, '-inf', fmt(nowSec), 'BYSCORE', 'LIMIT', '0', '1000')
  local seconds = {}
  for _, member in ipairs(ended) do
    if string.byte(member, 1) ~= 117 then -- not "u:..."
      seconds[#seconds + 1] = member
    end
  end
  if #seconds > 0 then
    for _, v in ipairs(redis.call('HMGET', count, unpack(seconds))) do
      n = n - (tonumber(v) or 0)
    end
    redis.call('HDEL', count, unpack(seconds))
  end
  if #ended > 0 then
    redis.call('ZREM', ends, unpack(ended))
  end
  n = math.max(0, n)
  local first = tonumber(redis.call('ZRANGE', ends, '0', '0', 'WITHSCORES')[2])
  if first then
    -- A retired unit's half second: the next sweep is due once it has passed, not at its whole second.
    first = math.ceil(first)
    redis.call('HSET', count, 'n', fmt(n), 'm', fmt(first))
  else
    redis.call('HSET', count, 'n', fmt(n))
    redis.call('HDEL', count, 'm')
  end
  return n, first
end

-- Counts one unit in second (secondText: its digits), given the shard's n, m and x and the second's count
-- v as just read (nil when absent): one HSET, plus, the first time a second is counted, its index entry,
-- and when it is the latest, both keys' expiry. Numbers go to Redis as digits made here (fmt): Redis 7.0
-- formats each Lua number it is passed with %.17g, several times the cost, and the second's digits are
-- made once for its three or four uses. The HSET is written out for each set of fields, not built as a
-- table: the lock pair's take builds none.
local function quotaCount(count, ends, second, secondText, n, m, x, v)
  local units, its = fmt(n + 1), fmt((v or 0) + 1)
  local later = not x or second > x
  if m and second >= m then
    if later then
      call('HSET', count, 'n', units, secondText, its, 'x', secondText)
    else
      call('HSET', count, 'n', units, secondText, its)
    end
  elseif later then
    call('HSET', count, 'n', units, secondText, its, 'm', secondText, 'x', secondText)
  else
    call('HSET', count, 'n', units, secondText, its, 'm', secondText)
  end
  -- A second's count may stay at 0 after a give-back until the second is swept; it stays indexed.
  if not v then
    call('ZADD', ends, secondText, secondText)
  end
  if later then
    -- Both keys last until the latest counted second has ended.
    local keep = fmt(second * 1000 - nowMs + 1000)
    call('PEXPIRE', count, keep)
    call('PEXPIRE', ends, keep)
  end
end

local function quotaAdd(count, ends, second)
  local secondText = fmt(second)
  local r = call('HMGET', count, 'n', 'm', 'x', secondText)
  quotaCount(count, ends, second, secondText, (r[1] or 0) + 0, r[2] and r[2] + 0, r[3] and r[3] + 0, r[4] and r[4] + 0)
end

local function quotaTake(count, ends, endMs, cap)
  -- quotaSecond, written out: acquire then makes no closure for it.
  local second = ceil(endMs / 1000)
  local secondText = fmt(second)
  local r = call('HMGET', count, 'n', 'm', 'x', secondText)
  local n, m, v = (r[1] or 0) + 0, r[2] and r[2] + 0, r[4] and r[4] + 0
  if m and m * 1000 <= nowMs then
    n, m = quotaSweep(count, ends, n)
  end
  if n >= cap then
    return max(1, (m or 0) * 1000 - nowMs)
  end
  quotaCount(count, ends, second, secondText, n, m, r[3] and r[3] + 0, v)
  return nil
end

-- Returns whether a unit was given back (false: its second was no longer counted). Two HINCRBYs, not a
-- read and a write: their replies are numbers, where HMGET's is a table Redis builds (and grows) field by
-- field, and nothing is formatted. A second no longer counted (ended and swept, never counted, or at 0
-- already) goes below 0 and is deleted again, which leaves it as a sweep reads it (an absent second
-- counts 0) and n untouched.
local function quotaGive(count, second)
  local secondText = fmt(second)
  if call('HINCRBY', count, secondText, '-1') < 0 then
    call('HDEL', count, secondText)
    return false
  end
  -- n counts the second's units, so is at least 1 here; kept at 0 or more all the same.
  if call('HINCRBY', count, 'n', '-1') < 0 then
    call('HSET', count, 'n', '0')
  end
  return true
end

-- The unit moves only if its second still counts it: one read (quotaGive's), not a read of its own before
-- it; a unit no longer counted is not counted again elsewhere.
local function quotaMove(count, ends, fromSecond, toSecond)
  if fromSecond ~= toSecond and quotaGive(count, fromSecond) then
    quotaAdd(count, ends, toSecond)
  end
end
