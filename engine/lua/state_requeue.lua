-- Move shards back for a resubmit, each only if it is still in the state the caller saw: a shard
-- that moved on meanwhile (a late delivery finished it) is left alone. Its claims start afresh and
-- the run becomes active again, to be reduced anew (engine/state.py: RunState.requeue).
-- KEYS[1] run hash  KEYS[2] states  KEYS[3] active runs  KEYS[4] claims per shard and leased state
-- KEYS[5] waiting
-- ARGV[1] run id  ARGV[2 ..] triples (shard, expected state, state to go back to)
-- Returns the shards moved.
-- The set terminal and the state names are filled in from ShardState at load (engine/scripts.py).
local terminal = ${terminal}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for i = 2, #ARGV, 3 do
  local shard, expected, back = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if redis.call('HGET', KEYS[2], shard) == expected then
    redis.call('HSET', KEYS[2], shard, back)
    if terminal[expected] then redis.call('HINCRBY', KEYS[1], 'terminal', -1) end
    redis.call('HDEL', KEYS[4], shard .. ':${executing}', shard .. ':${grading}')
    redis.call('ZADD', KEYS[5], now, shard)
    table.insert(out, shard)
  end
end
if #out > 0 then
  redis.call('HDEL', KEYS[1], 'reduced')
  redis.call('SADD', KEYS[3], ARGV[1])
end
return out
