-- The shards noted unsent longer than the grace period: the waiting ones come back to be sent
-- (their note renewed), the rest (their message did go out, only the note was not cleared) are
-- cleared (engine/state.py: RunState.unsent).
-- KEYS[1] states  KEYS[2] unsent  KEYS[3] leases  KEYS[4] waiting
-- ARGV[1] grace period (ms)  ARGV[2 ..] the waiting states
-- Returns flat {shard, state, ...} of the shards to send.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[1]))
local out = {}
for _, shard in ipairs(old) do
  local cur = redis.call('HGET', KEYS[1], shard)
  local waiting = false
  for j = 2, #ARGV do if cur == ARGV[j] then waiting = true end end
  if waiting and not redis.call('ZSCORE', KEYS[3], shard) then
    table.insert(out, shard)
    table.insert(out, cur)
    redis.call('ZADD', KEYS[2], now, shard)
    redis.call('ZADD', KEYS[4], now, shard)
  else
    redis.call('ZREM', KEYS[2], shard)
  end
end
return out
