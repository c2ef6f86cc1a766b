--[[
Shared include (not a command of its own): the namespace quota, one shard of it. A namespace's quota
is split over QUOTA_SHARDS shards (src/store/redis/keys.ts); a lock counts in the shard its keys live
in, so the lock scripts take and give its unit in the same atomic step as the grant or release. Each
shard admits at most ceil(limit / shards) units (the caller passes that cap); docs/limits.md states
what this bounds. Uses nowMs and fmt from _common.lua.

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
  quotaTake(q, endMs, cap) -> nil, or retryAfterMs when the shard holds cap units
  quotaAdd(q, second)          counts one unit in second (no cap: a renewal or a move)
  quotaGive(q, second) -> given  gives back one unit counted in second, if that second is still counted
  quotaMove(q, fromSecond, toSecond)
  quotaRetired(score) -> whether a quota-slot unit's score marks it retired
where q is {countKey, endsKey}.
]]
local function quotaSecond(endMs)
  return math.ceil(endMs / 1000)
end

-- Counted units have whole seconds as scores; a retired one, its second and a half (quota-free.lua).
local function quotaRetired(score)
  return score % 1 ~= 0
end

-- Drops the ended seconds (at most 1000 per call; the rest on the next) and returns the units left,
-- and the earliest counted second left (nil when none).
local function quotaSweep(q, n)
  local nowSec = math.floor(nowMs / 1000)
  local ended = redis.call('ZRANGE', q[2], '-inf', fmt(nowSec), 'BYSCORE', 'LIMIT', '0', '1000')
  local seconds = {}
  for _, member in ipairs(ended) do
    if string.byte(member, 1) ~= 117 then -- not "u:..."
      seconds[#seconds + 1] = member
    end
  end
  if #seconds > 0 then
    for _, v in ipairs(redis.call('HMGET', q[1], unpack(seconds))) do
      n = n - (tonumber(v) or 0)
    end
    redis.call('HDEL', q[1], unpack(seconds))
  end
  if #ended > 0 then
    redis.call('ZREM', q[2], unpack(ended))
  end
  n = math.max(0, n)
  local first = tonumber(redis.call('ZRANGE', q[2], '0', '0', 'WITHSCORES')[2])
  if first then
    -- A retired unit's half second: the next sweep is due once it has passed, not at its whole second.
    first = math.ceil(first)
    redis.call('HSET', q[1], 'n', fmt(n), 'm', fmt(first))
  else
    redis.call('HSET', q[1], 'n', fmt(n))
    redis.call('HDEL', q[1], 'm')
  end
  return n, first
end

-- Counts one unit in second (secondText: its digits), given the shard's n, m and x and the second's count
-- v as just read (nil when absent): one HSET, plus, the first time a second is counted, its index entry,
-- and when it is the latest, both keys' expiry. Numbers go to Redis as digits made here (fmt): Redis 7.0
-- formats each Lua number it is passed with %.17g, several times the cost, and the second's digits are
-- made once for its three or four uses.
local function quotaCount(q, second, secondText, n, m, x, v)
  local set = {'n', fmt(n + 1), secondText, fmt((v or 0) + 1)}
  if not m or second < m then
    set[5], set[6] = 'm', secondText
  end
  local later = not x or second > x
  if later then
    set[#set + 1], set[#set + 2] = 'x', secondText
  end
  redis.call('HSET', q[1], unpack(set))
  -- A second's count may stay at 0 after a give-back until the second is swept; it stays indexed.
  if not v then
    redis.call('ZADD', q[2], secondText, secondText)
  end
  if later then
    -- Both keys last until the latest counted second has ended.
    local keep = fmt(second * 1000 - nowMs + 1000)
    redis.call('PEXPIRE', q[1], keep)
    redis.call('PEXPIRE', q[2], keep)
  end
end

local function quotaAdd(q, second)
  local secondText = fmt(second)
  local r = redis.call('HMGET', q[1], 'n', 'm', 'x', secondText)
  quotaCount(q, second, secondText, (r[1] or 0) + 0, r[2] and r[2] + 0, r[3] and r[3] + 0, r[4] and r[4] + 0)
end

local function quotaTake(q, endMs, cap)
  -- quotaSecond, written out: acquire then makes no closure for it.
  local second = math.ceil(endMs / 1000)
  local secondText = fmt(second)
  local r = redis.call('HMGET', q[1], 'n', 'm', 'x', secondText)
  local n, m, v = (r[1] or 0) + 0, r[2] and r[2] + 0, r[4] and r[4] + 0
  if m and m * 1000 <= nowMs then
    n, m = quotaSweep(q, n)
  end
  if n >= cap then
    return math.max(1, (m or 0) * 1000 - nowMs)
  end
  quotaCount(q, second, secondText, n, m, r[3] and r[3] + 0, v)
  return nil
end

-- Returns whether a unit was given back (false: its second was no longer counted).
local function quotaGive(q, second)
  local secondText = fmt(second)
  local vn = redis.call('HMGET', q[1], secondText, 'n')
  local left = vn[1] and vn[1] + 0
  if not left or left <= 0 then
    -- Ended and swept (or never counted): nothing of it is counted any more.
    return false
  end
  redis.call('HSET', q[1], secondText, fmt(left - 1), 'n', fmt(math.max(0, (vn[2] or 1) - 1)))
  return true
end

-- The unit moves only if its second still counts it: one read (quotaGive's), not a read of its own before
-- it; a unit no longer counted is not counted again elsewhere.
local function quotaMove(q, fromSecond, toSecond)
  if fromSecond ~= toSecond and quotaGive(q, fromSecond) then
    quotaAdd(q, toSecond)
  end
end
