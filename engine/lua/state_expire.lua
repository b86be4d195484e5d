-- Expire a lease now, only while the token holds it (engine/state.py: RunState.expire_lease).
-- KEYS[1] leases  KEYS[2] owners
-- ARGV[1] shard  ARGV[2] lease token
-- Returns 1 when expired, 0 when the lease is not the token's.
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[1], 'XX', 0, ARGV[1])
return 1
