-- Extend a lease while its token holds it (engine/state.py: RunState.heartbeat).
-- KEYS[1] leases  KEYS[2] owners
-- ARGV[1] shard  ARGV[2] lease token  ARGV[3] lease ttl (ms)
-- Returns 1 when extended, 0 when the lease is not the token's.
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
return 1
