-- epoch: the mark that tells a Redis that kept its data from one that lost it. The first caller
-- to find the mark missing (a new Redis, a restart without persistence, a flush) sets it to its
-- own random value and the Redis time; every caller learns both. A value other than the one a
-- process saw before means the data it counted there is gone (docs/limiter-internals.md,
-- "Recovery"), and no process grants there until the mark's time + the recovery barrier.
-- KEYS[1]  rl:{epoch…} — a key on the shard being checked (its tag picks the shard)
-- ARGV[1]  a random value, used if the mark is missing
-- Reply: { value, set at (Unix ms), now (Unix ms) }
local clock = redis.call('TIME')
local now = clock[1] * 1000.0 + math.floor(clock[2] / 1000)
local mark = redis.call('GET', KEYS[1])
if not mark then
  mark = ARGV[1] .. ',' .. string.format('%.0f', now)
  redis.call('SET', KEYS[1], mark)
end
local value, at = string.match(mark, '^([^,]+),(%d+)$')
return { value, tonumber(at), now }
