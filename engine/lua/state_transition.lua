-- Move a shard forward to a new state, ending its lease (engine/state.py: RunState.transition).
-- KEYS[1] run hash  KEYS[2] states  KEYS[3] leases  KEYS[4] owners
-- KEYS[5] in-flight list of execute  KEYS[6] in-flight list of grade  KEYS[7] waiting (delivery ledger)
-- ARGV[1] shard  ARGV[2] new state  ARGV[3] lease token ('' = no owner check)
-- ARGV[4] n, the number of states allowed to move to the new one  ARGV[5 .. 4+n] those states
-- ARGV[5+n] the shard's in-flight entry ('<run>|<shard>')
-- Returns {moved 0/1, previous state or '', terminal shards after the move (0: not counted), total}.
-- The sets terminal and waiting and the state names are filled in from ShardState at load (engine/scripts.py).
local terminal = ${terminal}
local waiting = ${waiting}
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if not cur then return {0, '', 0, 0} end
local n = tonumber(ARGV[4])
local ok = false
for i = 1, n do if ARGV[4 + i] == cur then ok = true end end
if not ok then return {0, cur, 0, 0} end
if ARGV[3] ~= '' and redis.call('HGET', KEYS[4], ARGV[1]) ~= ARGV[3] then return {0, cur, 0, 0} end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
if cur == '${executing}' then redis.call('LREM', KEYS[5], 0, ARGV[5 + n]) end
if cur == '${grading}' then redis.call('LREM', KEYS[6], 0, ARGV[5 + n]) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], 'progress', now)
if waiting[ARGV[2]] then redis.call('ZADD', KEYS[7], now, ARGV[1]) else redis.call('ZREM', KEYS[7], ARGV[1]) end
local done, total = 0, tonumber(redis.call('HGET', KEYS[1], 'total') or '0')
if terminal[ARGV[2]] and not terminal[cur] then
  done = redis.call('HINCRBY', KEYS[1], 'terminal', 1)
end
return {1, cur, done, total}
