-- The waiting shards sent before their queue's watermark: their message had left the queue
-- unclaimed. Re-dates them (their new message goes out now) and drops entries that no longer wait
-- (claimed or ended) (engine/delivery.py: Delivery.overdue).
-- KEYS[1] states  KEYS[2] waiting  KEYS[3] leases
-- ARGV[1] watermark of the execute queue  ARGV[2] watermark of the grade queue (ms; DRAINED: now)
-- Returns flat {shard, state, ...} of the shards to send again.
-- The state names are filled in from ShardState at load (engine/scripts.py).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function watermark(arg)
  local mark = tonumber(arg)
  if mark >= ${drained} then return now end
  return mark
end
local mark = {['${queued}'] = watermark(ARGV[1]), ['${executed}'] = watermark(ARGV[2])}
-- Only shards sent before the later watermark can be overdue: in a deep queue that is few of
-- them, and the script does not walk the waiting backlog.
local upper = string.format('(%.17g', math.max(mark['${queued}'], mark['${executed}']))
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', upper, 'WITHSCORES')
local out = {}
for i = 1, #old, 2 do
  local shard, sent = old[i], tonumber(old[i + 1])
  local cur = redis.call('HGET', KEYS[1], shard)
  if not cur or not mark[cur] or redis.call('ZSCORE', KEYS[3], shard) then
    redis.call('ZREM', KEYS[2], shard)
  elseif sent < mark[cur] then
    redis.call('ZADD', KEYS[2], now, shard)
    table.insert(out, shard)
    table.insert(out, cur)
  end
end
return out
