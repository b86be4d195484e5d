-- A run's liveness as status reads it, at one instant of Redis's clock (engine/delivery.py:
-- Delivery.waiting). A lease is live until the expiry it is scored with: an expired one holds a
-- shard no worker runs any more (its worker died), which waits for the reaper to hand it back.
-- KEYS[1] waiting  KEYS[2] leases  KEYS[3] run hash
-- ARGV none
-- Returns {now (ms), shards waiting, send time (ms) of the oldest of them or '', live leases,
-- expired leases, the run's progress (ms) or '', when (ms) the latest expired lease expired or ''}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local latest = redis.call('ZREVRANGEBYSCORE', KEYS[2], now, '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
return {
  now,
  redis.call('ZCARD', KEYS[1]),
  oldest[2] or '',
  redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf'),
  redis.call('ZCOUNT', KEYS[2], '-inf', now),
  redis.call('HGET', KEYS[3], 'progress') or '',
  latest[2] or '',
}
