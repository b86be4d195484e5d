-- Record a queue's watermark now and return the newest one seen at least `age` ago, dropping older
-- samples (engine/delivery.py: Delivery.watermarks_seen).
-- KEYS[1] the queue's watermark samples (score: when seen, ms; member: '<when>|<watermark>')
-- ARGV[1] the watermark now (DRAINED: every message sent until now has left)  ARGV[2] age (ms)
-- Returns that watermark as a string, '0' when no sample is that old.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- A real watermark is kept as it is: a batch's send times run a thousandth of a millisecond apart
-- and can lie past now, and every message sent before it has left all the same.
local mark = tonumber(ARGV[1])
if mark >= ${drained} then mark = now end
redis.call('ZADD', KEYS[1], now, string.format('%d|%.3f', now, mark))
local seen = redis.call('ZREVRANGEBYSCORE', KEYS[1], now - tonumber(ARGV[2]), '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
if #seen == 0 then return '0' end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. seen[2])
return string.sub(seen[1], string.find(seen[1], '|', 1, true) + 1)
