-- Return the shards whose lease expired to the state before the leased one (engine/state.py: RunState.reap).
-- KEYS[1] states  KEYS[2] leases  KEYS[3] owners  KEYS[4] unsent
-- KEYS[5] in-flight list of execute  KEYS[6] in-flight list of grade  KEYS[7] waiting  KEYS[8] run hash
-- ARGV[1] executing  ARGV[2] queued  ARGV[3] grading  ARGV[4] executed (the state names)  ARGV[5] run id
-- Returns flat {shard, state it went back to, ...}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
local out = {}
for _, shard in ipairs(expired) do
  local cur = redis.call('HGET', KEYS[1], shard)
  local back = nil
  if cur == ARGV[1] then back = ARGV[2] elseif cur == ARGV[3] then back = ARGV[4] end
  redis.call('ZREM', KEYS[2], shard)
  redis.call('HDEL', KEYS[3], shard)
  redis.call('LREM', KEYS[5], 0, ARGV[5] .. '|' .. shard)
  redis.call('LREM', KEYS[6], 0, ARGV[5] .. '|' .. shard)
  if back then
    redis.call('HSET', KEYS[1], shard, back)
    redis.call('ZADD', KEYS[4], now, shard)  -- unsent until its re-send is confirmed
    redis.call('ZADD', KEYS[7], now, shard)
    redis.call('HSET', KEYS[8], 'progress', now)  -- a move: the stall bound counts from here
    table.insert(out, shard)
    table.insert(out, back)
  end
end
return out
