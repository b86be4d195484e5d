-- Date a run's reduce as started now: the reduce task is running, not lost
-- (engine/delivery.py: Delivery.reducing).
-- KEYS[1] run hash
-- No ARGV. Returns 1.
local t = redis.call('TIME')
redis.call('HSET', KEYS[1], 'reduce_sent', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
return 1
