-- Push one outcome line (or none) and, when the list reaches the segment size (or, with no line,
-- holds anything), rename it to a new pending segment (engine/segments.py: SegmentWriter).
-- The id starts with the server's clock, so segments cut after a Redis restart (which resets the
-- counter) still sort after every earlier one.
-- KEYS[1] lines  KEYS[2] segment counter  KEYS[3] pending segments set
-- ARGV[1] the line ('': push nothing, cut whatever the list holds)  ARGV[2] segment size
-- ARGV[3] pending segment key prefix
-- Returns the new segment's id, or false when none was cut.
if ARGV[1] ~= '' then
  if redis.call('RPUSH', KEYS[1], ARGV[1]) < tonumber(ARGV[2]) then return false end
elseif redis.call('LLEN', KEYS[1]) == 0 then
  return false
end
local seq = redis.call('INCR', KEYS[2])
local t = redis.call('TIME')
local id = string.format('%010d%06d-%012d', tonumber(t[1]), tonumber(t[2]), seq)
redis.call('RENAME', KEYS[1], ARGV[3] .. id)
redis.call('SADD', KEYS[3], id)
return id
