-- Hand a leased shard back (its worker is shutting down): the state before the leased one, no
-- lease, and the claim not counted (a hand-back is a clean return, not a death). The shard is
-- noted unsent until its re-send is confirmed, like a reaped one (engine/state.py: RunState.release).
-- KEYS[1] states  KEYS[2] leases  KEYS[3] owners  KEYS[4] claims per shard and leased state
-- KEYS[5] in-flight list of the leased state's queue  KEYS[6] unsent  KEYS[7] waiting
-- ARGV[1] shard  ARGV[2] lease token  ARGV[3] leased state  ARGV[4] state to go back to
-- ARGV[5] the shard's in-flight entry ('<run>|<shard>')
-- Returns 1 when handed back, 0 when the token does not hold the shard in the leased state.
if redis.call('HGET', KEYS[3], ARGV[1]) ~= ARGV[2] then return 0 end
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[3] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], ARGV[1], ARGV[4])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
if tonumber(redis.call('HINCRBY', KEYS[4], ARGV[1] .. ':' .. ARGV[3], -1)) < 0 then
  redis.call('HSET', KEYS[4], ARGV[1] .. ':' .. ARGV[3], 0)
end
redis.call('LREM', KEYS[5], 0, ARGV[5])
redis.call('ZADD', KEYS[6], now, ARGV[1])
redis.call('ZADD', KEYS[7], now, ARGV[1])
return 1
