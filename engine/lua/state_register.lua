-- Register new shards and note them as not yet sent and waiting, in one step: a shard is never
-- known without also being known to need a message (engine/state.py: RunState.register).
-- KEYS[1] states  KEYS[2] unsent  KEYS[3] waiting
-- ARGV[1] initial state  ARGV[2 ..] shard ids (a shard already registered keeps its state)
-- Returns the number of shards newly registered.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local added = 0
for i = 2, #ARGV do
  if redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[1]) == 1 then
    redis.call('ZADD', KEYS[2], now, ARGV[i])
    redis.call('ZADD', KEYS[3], now + (i - 2) / 1000, ARGV[i])
    added = added + 1
  end
end
return added
