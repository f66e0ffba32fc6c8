-- decide batch: the requests of one event-loop turn, atomically, in order — each decided exactly as
-- decide.lua decides one (a consumer twice in the batch is counted twice, the second seeing the
-- first), each at its own Redis TIME as decide reads it. The Redis store sends it only with
-- batching on (stores/redis.ts; docs/limiter-internals.md says why that is off by default).
-- KEYS: 3 per request, in order: rl:{id}:m  rl:{id}:d  rl:{id}:b (window.lua describes them; on a
--       Cluster one call carries only keys of one slot)
-- ARGV: 3 per request, in the same order: per-minute limit, per-day limit, ban policy (as decide.lua)
-- Returns: one decision per request (window.lua; decision.lua makes it), in order.
local replies = {}
for i = 1, #KEYS, 3 do
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  replies[#replies + 1] = decision(KEYS[i], KEYS[i + 1], KEYS[i + 2], tonumber(ARGV[i]), tonumber(ARGV[i + 1]), ARGV[i + 2], nil)
end
return replies
