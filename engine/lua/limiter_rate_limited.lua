-- A 429 came back: set the shared cool-down and shrink the pace once per episode: only a 429 on a
-- request that started after the last shrink is news (the others were already in flight when the
-- pace was cut) (worker/models/limiter.py: Limiter.report_rate_limited).
-- KEYS[1] the model's limiter state hash
-- ARGV[1] retry-after (ms)  ARGV[2] the request's start (Redis time, ms)  ARGV[3] shrink factor
-- ARGV[4] the pace's floor
-- Returns {pace factor, cool-down left (ms)} as strings.
local t = redis.call('TIME'); local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local function num(v, d) if v then return tonumber(v) end return d end
local h = redis.call('HMGET', KEYS[1], 'factor', 'cooldown_until', 'shrunk_at')
local factor, cooldown, shrunk_at = num(h[1], 1), num(h[2], 0), num(h[3], 0)
cooldown = math.max(cooldown, now + tonumber(ARGV[1]))
redis.call('HSET', KEYS[1], 'cooldown_until', tostring(cooldown))
if tonumber(ARGV[2]) >= shrunk_at then
  factor = math.max(tonumber(ARGV[4]), factor * tonumber(ARGV[3]))
  redis.call('HSET', KEYS[1], 'factor', tostring(factor), 'shrunk_at', tostring(now))
end
redis.call('PEXPIRE', KEYS[1], 3600000)
return {tostring(factor), tostring(cooldown - now)}
