-- Write a worker node's heartbeat in Redis time, so every host compares against one clock
-- (engine/fleet.py: Fleet.beat).
-- KEYS[1] the node's record hash
-- ARGV[1] record ttl (s)  ARGV[2] ms since the node last took a message  ARGV[3 ..] field, value pairs
-- Returns the Redis time (ms).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], 'beat_ms', now, 'consumed_ms', now - tonumber(ARGV[2]))
for i = 3, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[1]))
return now
