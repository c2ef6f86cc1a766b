--[[
history-append: one atomic step of a lease history batch for one or more quota shards. Not built on
_common.lua (it reads no lease): called with its key count first, as EVALSHA takes it.

A shard keeps its keys' histories in one HASH (field: the key's kind letter and name; value: its count of
events, then its last events, one a line, oldest first) and an index (a ZSET of the same fields by last write, on Redis's
clock). One hash per shard, not a key per history: a shard's lists are read, written and ranked with one
HMGET, one HSET and one ZADD per call, whatever their number, and a history needs no key of its own to
create, give a TTL and delete (each was a call per list, and most of the script's time).

Bounds. The index deletes the least recently written past the shard's cap (from the index and the hash).
The hash and the index live at least `retention` past the shard's last write: their TTL is set when the
index is new (ZADD added as many members as it then holds) or the hash is (HSET added as many fields as it
then holds), and when the caller asks (once per shard per refresh period: it sends a TTL of retention + 2
refresh periods, see redis-history.ts). A call that refreshes also drops the fields written last more than
`retention` ago (a key idle that long, in a shard still written), so a key idle for the retention goes at
most a refresh period or two later, as with a TTL of its own.

The layout before: a LIST per key (its Redis key name, which holds the shard's hash tag, so a `{`) in the
same index. Such a member is never written again; popped past the cap or idle, its list is deleted
(redis-history.ts reads a key's old list and its field together until the lists have expired).

Every key of a shard carries the shard's hash tag: on a Cluster a call holds one shard (one slot);
elsewhere one call holds several.

KEYS     per shard: its index (ZSET), then its hash (HASH), in the order of ARGV's groups
ARGV[1]  TTL of a shard's hash and index, ms (retention + 2 refresh periods)
ARGV[2]  events kept per key
ARGV[3]  keys kept per shard index
ARGV[4]  the retention, ms
ARGV[5..] per shard, a group: its count of keys n; its refresh flag ("1": set the TTLs even if the keys
         were there, and drop the idle; "0": only the TTL of a key this call created); then n pairs of
         arguments: the key's field, and its events joined by line breaks, oldest first (no stored event
         holds a raw line break; at most `events kept per key` of them)

Returns:
  1   written
]]

local perKey, perShard, retention = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
-- The TTL as sent, a string: a number passed to redis.call is formatted anew on every call.
local a, k, ttl = 5, 1, ARGV[1]
-- Ranks from Redis's clock, read once a call (not the top of each index, one call per shard): they go up
-- from call to call, whichever instance sent it, as each key takes the script longer than the 1 µs its
-- rank adds.
local time = redis.call('TIME')
-- No field is `~` (a field is a kind letter, `/` and a name).
local WIDE = string.rep('-', 65)
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000

-- Deletes index members: a field from the hash, an old layout's list (a key name: it holds a `{`) itself.
local function drop(data, members)
  local fields, lists = {}, {}
  for j = 1, #members do
    local m = members[j]
    if string.find(m, '{', 1, true) then lists[#lists + 1] = m else fields[#fields + 1] = m end
  end
  if #fields > 0 then redis.call('HDEL', data, unpack(fields)) end
  if #lists > 0 then redis.call('DEL', unpack(lists)) end
end

-- A key's value: its count of lines, then its lines (events), oldest first, each after a line break; so a
-- write finds what to drop without reading the whole value (counting the lines of a key at 50 events
-- every write cost 3.5 times the script's time of a list). `older`: what the hash held (or false), `blob`:
-- what this call adds (at most perKey lines). The last perKey lines are kept.
local function joined(older, blob)
  local added, nl = 1, string.find(blob, '\n', 1, true)
  while nl do
    added = added + 1
    nl = string.find(blob, '\n', nl + 1, true)
  end
  local head = older and string.find(older, '\n', 1, true)
  local had = head and tonumber(string.sub(older, 1, head - 1))
  -- None (or a value that does not start with its count: replaced, never misread).
  if not had then return added .. '\n' .. blob end
  local over = had + added - perKey
  if over >= had then return added .. '\n' .. blob end
  local from = head + 1
  -- The first `over` lines of what was there go (over < had: never past its last line; a value with
  -- fewer lines than its count is replaced).
  for _ = 1, over do
    local cut = string.find(older, '\n', from, true)
    if not cut then return added .. '\n' .. blob end
    from = cut + 1
  end
  return (had + added - math.max(over, 0)) .. '\n' .. string.sub(older, from) .. '\n' .. blob
end

while k <= #KEYS do
  local index, data, keys, refresh = KEYS[k], KEYS[k + 1], tonumber(ARGV[a]), ARGV[a + 1] == '1'
  a = a + 2
  local score, added, created = now, 0, 0
  -- In chunks of 500 keys (1000 arguments): unpack's limit (some 8000) is never reached.
  for first = 0, keys - 1, 500 do
    local n = math.min(500, keys - first)
    local fields = {}
    for i = 1, n do fields[i] = ARGV[a + 2 * (first + i) - 2] end
    local older = redis.call('HMGET', data, unpack(fields))
    local values, ranks = {}, {}
    for i = 1, n do
      local at = a + 2 * (first + i) - 2
      values[2 * i - 1], values[2 * i] = ARGV[at], joined(older[i], ARGV[at + 1])
      ranks[2 * i - 1], ranks[2 * i] = score, ARGV[at]
      score = score + 0.001
    end
    created = created + redis.call('HSET', data, unpack(values))
    added = added + redis.call('ZADD', index, unpack(ranks))
  end
  a = a + 2 * keys
  local held = redis.call('ZCARD', index)
  -- As many members (fields) as this call added: the index (hash) was not there, it held one at least else.
  if refresh or held == added then redis.call('PEXPIRE', index, ttl) end
  if refresh or (created == keys and redis.call('HLEN', data) == created) then
    redis.call('PEXPIRE', data, ttl)
    -- A field whose value is longer than hash-max-listpack-value (64) makes a hash a hash table, which it
    -- stays: a small hash (a listpack) finds a field by reading the others (at 313 keys a shard, about half
    -- the script's time when every key is new with one short event; one longer than 64 bytes converts it anyway).
    redis.call('HSET', data, '~', WIDE)
    redis.call('HDEL', data, '~')
  end
  local over = held - perShard
  -- Past the cap: the least recently written leave the index (one ZPOPMIN) and the hash (one HDEL per 1000).
  while over > 0 do
    local popped = redis.call('ZPOPMIN', index, math.min(over, 1000))
    local members = {}
    for j = 1, #popped, 2 do members[#members + 1] = popped[j] end
    drop(data, members)
    over = over - #members
  end
  if refresh then
    -- The idle: written last more than the retention ago (at most 1000 a call; the next refresh takes more).
    local idle = redis.call('ZRANGEBYSCORE', index, '-inf', now - retention, 'LIMIT', 0, 1000)
    if #idle > 0 then
      redis.call('ZREM', index, unpack(idle))
      drop(data, idle)
    end
  end
  k = k + 2
end
return 1
