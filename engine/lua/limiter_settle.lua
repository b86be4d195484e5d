-- Release a call slot, correct the token estimate with the actual usage and, after a success, let
-- the pace grow (worker/models/limiter.py: Lease.settle).
-- KEYS[1] the model's limiter state hash  KEYS[2] its leases sorted set
-- ARGV[1] lease id  ARGV[2] token correction (estimate - actual)  ARGV[3] success 0/1
-- ARGV[4] pace growth per success
-- Returns 1.
local function num(v, d) if v then return tonumber(v) end return d end
redis.call('ZREM', KEYS[2], ARGV[1])
local correction = tonumber(ARGV[2])
if correction ~= 0 and redis.call('HEXISTS', KEYS[1], 'tok_level') == 1 then
  redis.call('HINCRBYFLOAT', KEYS[1], 'tok_level', correction)
end
if ARGV[3] == '1' then
  local factor = math.min(1, num(redis.call('HGET', KEYS[1], 'factor'), 1) + tonumber(ARGV[4]))
  redis.call('HSET', KEYS[1], 'factor', tostring(factor))
end
return 1
