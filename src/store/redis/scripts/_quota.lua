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
               slot calls (slot-reserve.lua), whose caller names it by id rather than by its end
A unit counts until the end of its second unless given back first; a take first drops the seconds
that have ended (only when m says one has), so a lease that expires without a release stops counting
within a second of its end. Both keys live until the latest counted second ends (plus a second).

Defines:
  quotaSecond(endMs) -> second
  quotaTake(q, endMs, cap) -> nil, or retryAfterMs when the shard holds cap units
  quotaAdd(q, second)          counts one unit in second (no cap: a renewal or a move)
  quotaGive(q, second)         gives back one unit counted in second, if that second is still counted
  quotaMove(q, fromSecond, toSecond)
where q is {countKey, endsKey}.
]]
local function quotaSecond(endMs)
  return math.ceil(endMs / 1000)
end

-- Drops the ended seconds (at most 1000 per call; the rest on the next) and returns the units left.
local function quotaSweep(q, n)
  local nowSec = math.floor(nowMs / 1000)
  local ended = redis.call('ZRANGE', q[2], '-inf', nowSec, 'BYSCORE', 'LIMIT', 0, 1000)
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
  for _, member in ipairs(ended) do
    redis.call('ZREM', q[2], member)
  end
  n = math.max(0, n)
  local first = redis.call('ZRANGE', q[2], 0, 0, 'WITHSCORES')
  if first[2] then
    redis.call('HSET', q[1], 'n', n, 'm', first[2])
  else
    redis.call('HSET', q[1], 'n', n)
    redis.call('HDEL', q[1], 'm')
  end
  return n
end

local function quotaAdd(q, second)
  redis.call('HINCRBY', q[1], 'n', 1)
  if redis.call('HINCRBY', q[1], second, 1) > 1 then
    return
  end
  -- A second counted for the first time: index it, and keep both keys until it has ended.
  redis.call('ZADD', q[2], second, second)
  local mx = redis.call('HMGET', q[1], 'm', 'x')
  local m, x = tonumber(mx[1]), tonumber(mx[2])
  if not m or second < m then
    redis.call('HSET', q[1], 'm', second)
  end
  if not x or second > x then
    redis.call('HSET', q[1], 'x', second)
    local keep = second * 1000 - nowMs + 1000
    redis.call('PEXPIRE', q[1], keep)
    redis.call('PEXPIRE', q[2], keep)
  end
end

local function quotaTake(q, endMs, cap)
  local nm = redis.call('HMGET', q[1], 'n', 'm')
  local n, m = tonumber(nm[1]) or 0, tonumber(nm[2])
  if m and m * 1000 <= nowMs then
    n = quotaSweep(q, n)
    m = tonumber(redis.call('HGET', q[1], 'm'))
  end
  if n >= cap then
    return math.max(1, (m or 0) * 1000 - nowMs)
  end
  quotaAdd(q, quotaSecond(endMs))
  return nil
end

local function quotaGive(q, second)
  local left = tonumber(redis.call('HGET', q[1], second))
  if not left then
    -- Ended and swept (or never counted): nothing of it is counted any more.
    return
  end
  if left <= 1 then
    redis.call('HDEL', q[1], second)
  else
    redis.call('HINCRBY', q[1], second, -1)
  end
  redis.call('HINCRBY', q[1], 'n', -1)
end

local function quotaMove(q, fromSecond, toSecond)
  if fromSecond == toSecond or not redis.call('HGET', q[1], fromSecond) then
    return
  end
  quotaGive(q, fromSecond)
  quotaAdd(q, toSecond)
end
