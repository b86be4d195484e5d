-- Replace a reservation by what the call actually used (engine/budget.py: RunBudget.settle).
-- KEYS[1] the run's budget hash
-- ARGV[1] reserved tokens  ARGV[2] reserved micro-dollars  ARGV[3] actual tokens  ARGV[4] actual micro-dollars
-- ARGV[5] the shard's key the reservation was counted under ('' none): its in-flight figure drops
--   by the reservation, and its fields go once nothing of it is in flight
-- Returns 1.
redis.call('HINCRBY', KEYS[1], 'reserved_tokens', 0 - tonumber(ARGV[1]))  -- never '-0': Redis refuses it as an integer
redis.call('HINCRBY', KEYS[1], 'reserved_cost', 0 - tonumber(ARGV[2]))
redis.call('HINCRBY', KEYS[1], 'spent_tokens', tonumber(ARGV[3]))
redis.call('HINCRBY', KEYS[1], 'spent_cost', tonumber(ARGV[4]))
local shard = ARGV[5] or ''
if shard ~= '' then
  local left = redis.call('HINCRBY', KEYS[1], 'inflight_tokens:' .. shard, 0 - tonumber(ARGV[1]))
  local cost = redis.call('HINCRBY', KEYS[1], 'inflight_cost:' .. shard, 0 - tonumber(ARGV[2]))
  if left <= 0 and cost <= 0 then
    redis.call('HDEL', KEYS[1], 'inflight_tokens:' .. shard, 'inflight_cost:' .. shard)
  end
end
return 1
