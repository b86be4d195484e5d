-- Replace a reservation by what the call actually used (engine/budget.py: RunBudget.settle).
-- KEYS[1] the run's budget hash
-- ARGV[1] reserved tokens  ARGV[2] reserved micro-dollars  ARGV[3] actual tokens  ARGV[4] actual micro-dollars
-- Returns 1.
redis.call('HINCRBY', KEYS[1], 'reserved_tokens', 0 - tonumber(ARGV[1]))  -- never '-0': Redis refuses it as an integer
redis.call('HINCRBY', KEYS[1], 'reserved_cost', 0 - tonumber(ARGV[2]))
redis.call('HINCRBY', KEYS[1], 'spent_tokens', tonumber(ARGV[3]))
redis.call('HINCRBY', KEYS[1], 'spent_cost', tonumber(ARGV[4]))
return 1
