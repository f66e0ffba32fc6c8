-- decide: one request of a consumer, atomically — answered key_banned without counting while
-- banned; else counted in both windows if both have room (ok); else rejected without consuming
-- quota (rate_limited), the 429 counted under the ban policy, which may start a ban (ban_started).
-- KEYS: 1 rl:{id}:m  2 rl:{id}:d  3 rl:{id}:b (window.lua describes them)
-- ARGV: 1 per-minute limit  2 per-day limit  3 ban policy 'threshold,windowMs,durationMs,maxMs',
--       or '' : never banned (anonymous clients)
-- Returns: a decision (window.lua; decision.lua makes it), admissions granted 1 when admitted.
local t = redis.call('TIME')
now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return decision(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], nil)
