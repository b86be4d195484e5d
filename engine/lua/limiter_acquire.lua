-- Take a model call slot: refuse during a shared cool-down, reclaim expired concurrency leases and
-- take one under the cap, reserve the next request slot and the call's estimated tokens
-- (worker/models/limiter.py: Limiter.acquire). Times are Redis time in ms (fractions kept), so
-- every worker on every host reads the same clock.
-- KEYS[1] the model's limiter state hash  KEYS[2] its leases sorted set
-- ARGV[1] lease id  ARGV[2] estimated tokens  ARGV[3] requests per minute  ARGV[4] tokens per minute
-- ARGV[5] max concurrency  ARGV[6] lease ttl (ms)  ARGV[7] headroom
-- Returns {granted '0'/'1', wait ms ('-1': every slot held), now ms} as strings (Lua floats would
-- be truncated to integers by the reply conversion).
local t = redis.call('TIME'); local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local function num(v, d) if v then return tonumber(v) end return d end
local st, leases = KEYS[1], KEYS[2]
local est, rpm, tpm = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local max_conc, ttl, headroom = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local h = redis.call('HMGET', st, 'factor', 'cooldown_until', 'req_level', 'req_ts', 'tok_level', 'tok_ts')
local factor, cooldown = num(h[1], 1), num(h[2], 0)
if cooldown > now then return {'0', tostring(cooldown - now), tostring(now)} end
redis.call('ZREMRANGEBYSCORE', leases, '-inf', now)
local cap = math.max(1, math.floor(max_conc * factor))
if redis.call('ZCARD', leases) >= cap then return {'0', '-1', tostring(now)} end
local delay = 0
if rpm > 0 then
  local rate = rpm * headroom * factor / 60000
  local level = math.min(1, num(h[3], 1) + (now - num(h[4], now)) * rate) - 1
  if level < 0 then delay = -level / rate end
  redis.call('HSET', st, 'req_level', tostring(level), 'req_ts', tostring(now))
end
if tpm > 0 then
  local rate = tpm * headroom * factor / 60000
  local capacity = tpm * headroom
  local level = math.min(capacity, num(h[5], capacity) + (now - num(h[6], now)) * rate) - est
  if level < 0 then delay = math.max(delay, -level / rate) end
  redis.call('HSET', st, 'tok_level', tostring(level), 'tok_ts', tostring(now))
end
redis.call('ZADD', leases, now + delay + ttl, ARGV[1])
redis.call('PEXPIRE', leases, math.floor(delay + 2 * ttl))
redis.call('PEXPIRE', st, 3600000)
return {'1', tostring(delay), tostring(now)}
