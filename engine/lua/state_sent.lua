-- Confirm shards' messages went out: no longer unsent, and a shard still waiting (not claimed
-- meanwhile: XX) has waited since now, a thousandth of a millisecond apart in publishing order
-- (a batch's order in its queue, which the delivery ledger reads: engine/delivery.py)
-- (engine/state.py: RunState.mark_sent).
-- KEYS[1] unsent  KEYS[2] waiting
-- ARGV[1 ..] shard ids in the order their messages were published
-- Returns the number of shards.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 1, #ARGV do
  redis.call('ZREM', KEYS[1], ARGV[i])
  redis.call('ZADD', KEYS[2], 'XX', now + (i - 1) / 1000, ARGV[i])
end
return #ARGV
