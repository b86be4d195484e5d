-- Claim a shard for work: move it from -> to under a lease, or take over a lease on `to` that
-- expired; count the claim (engine/state.py: RunState.claim).
-- KEYS[1] states  KEYS[2] leases  KEYS[3] owners  KEYS[4] claims per shard and leased state
-- KEYS[5] in-flight list of `to`'s queue  KEYS[6] resubmits  KEYS[7] run hash  KEYS[8] waiting
-- ARGV[1] shard  ARGV[2] from  ARGV[3] to  ARGV[4] lease token  ARGV[5] lease ttl (ms)
-- ARGV[6] the shard's in-flight entry ('<run>|<shard>')
-- Returns {0, current state or ''} when nothing was claimed, else {1, previous state, claims into
-- `to` counting this one, the shard's resubmit number, the run's manifest key or ''}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur == ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
elseif cur == ARGV[3] then
  local exp = redis.call('ZSCORE', KEYS[2], ARGV[1])
  if exp and tonumber(exp) > now then return {0, cur} end
else
  return {0, cur or ''}
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[5]), ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[4])
local claims = redis.call('HINCRBY', KEYS[4], ARGV[1] .. ':' .. ARGV[3], 1)
redis.call('LREM', KEYS[5], 0, ARGV[6])
redis.call('RPUSH', KEYS[5], ARGV[6])
redis.call('ZREM', KEYS[8], ARGV[1])
redis.call('HSET', KEYS[7], 'progress', now)
local manifest = redis.call('HGET', KEYS[7], 'manifest') or ''
return {1, cur, claims, redis.call('HGET', KEYS[6], ARGV[1]) or '0', manifest}
