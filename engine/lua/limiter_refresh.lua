-- Extend a call slot's lease (worker/models/limiter.py: the heartbeat). XX: a lease already
-- released (or reclaimed) is never brought back by a heartbeat that raced the release.
-- KEYS[1] the model's leases sorted set
-- ARGV[1] lease id  ARGV[2] lease ttl (ms)
-- Returns 1.
local t = redis.call('TIME'); local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], math.floor(2 * tonumber(ARGV[2])))
return 1
