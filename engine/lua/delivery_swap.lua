-- Set a key and return what it held; SET ... GET needs Redis 6.2 (engine/delivery.py: Delivery.restarted).
-- KEYS[1] the key
-- ARGV[1] the new value
-- Returns the old value, or nil.
local old = redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], ARGV[1])
return old
