-- Reserve a model call's estimate against the run's caps (engine/budget.py: RunBudget.reserve).
-- KEYS[1] the run's budget hash
-- ARGV[1] tokens  ARGV[2] micro-dollars (the estimate)
-- ARGV[3] the calling shard's own tokens so far  ARGV[4] its own micro-dollars so far
-- ARGV[5] the run's shards (0: the caller is no executor, no share rule)
-- ARGV[6] who shaped the request: 0 the product, 1 a harness's conversation the agent can grow
--   (its body is the estimate), 2 the agent alone (a side request of its own)
-- ARGV[7] the calling shard's key ('' none): its reservations still in flight count as its own,
--   so calls it fires at once cannot each pass as within its share; kept in the hash's fields
--   inflight_tokens:<key> and inflight_cost:<key> until settled
-- Returns 1 when reserved, 0 when the cap refuses (the run is marked exhausted), 2 when the caller
-- is past its share on a dimension and the call would pass the cap minus one share (not marked), or
-- when a call the agent shaped does not fit and is its own doing (never the run's, so not marked
-- either): a side request, or a conversation's request whose estimate alone is more than a share.
local function num(field) return tonumber(redis.call('HGET', KEYS[1], field) or '0') end
local tokens, cost = tonumber(ARGV[1]), tonumber(ARGV[2])
local own = {tokens = tonumber(ARGV[3]), cost = tonumber(ARGV[4])}
local shards = tonumber(ARGV[5])
local shaped = tonumber(ARGV[6] or '0')
local shard = ARGV[7] or ''
if shard ~= '' then
  own.tokens = own.tokens + num('inflight_tokens:' .. shard)
  own.cost = own.cost + num('inflight_cost:' .. shard)
end
local asked = {tokens = tokens, cost = cost}
local over = false
local caps = {}
for _, dim in ipairs({'tokens', 'cost'}) do
  local cap = redis.call('HGET', KEYS[1], 'max_' .. dim)
  if cap then
    cap = tonumber(cap)
    local share = shards > 0 and cap / shards or nil
    local past = share ~= nil and own[dim] >= share
    over = over or past
    caps[dim] = {cap = cap, ceiling = past and cap - share or cap, share = share}
  end
end
if redis.call('HGET', KEYS[1], 'exhausted') then return over and 2 or 0 end
for _, dim in ipairs({'tokens', 'cost'}) do
  local c = caps[dim]
  if c then
    local total = num('spent_' .. dim) + num('reserved_' .. dim) + asked[dim]
    if c.ceiling < c.cap and total > c.ceiling then return 2 end
    if total > c.cap then
      if shaped == 2 or (shaped == 1 and c.share ~= nil and asked[dim] > c.share) then return 2 end
      redis.call('HSET', KEYS[1], 'exhausted', dim)
      return over and 2 or 0
    end
  end
end
redis.call('HINCRBY', KEYS[1], 'reserved_tokens', tokens)
redis.call('HINCRBY', KEYS[1], 'reserved_cost', cost)
if shard ~= '' then
  redis.call('HINCRBY', KEYS[1], 'inflight_tokens:' .. shard, tokens)
  redis.call('HINCRBY', KEYS[1], 'inflight_cost:' .. shard, cost)
end
return 1
