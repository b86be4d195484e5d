-- Whether a run's reduce should be sent again: every shard is terminal, the run is not reduced, and
-- nothing (no transition, no earlier re-send of reduce) happened for that long; if so, dated now
-- (engine/delivery.py: Delivery.reduce_due).
-- KEYS[1] run hash
-- ARGV[1] older-than (ms)
-- Returns 1 when due, else 0.
if redis.call('HGET', KEYS[1], 'reduced') then return 0 end
local v = redis.call('HMGET', KEYS[1], 'terminal', 'total', 'progress', 'reduce_sent')
local total = tonumber(v[2] or '0')
if total == 0 or tonumber(v[1] or '0') < total then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local last = math.max(tonumber(v[3] or '0'), tonumber(v[4] or '0'))
if now - last < tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'reduce_sent', now)
return 1
