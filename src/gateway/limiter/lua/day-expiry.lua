-- day-expiry: gives a consumer's day hash the expiry grant.lua gives it, when it has none. Scripts before
-- every grant call set the expiry of each key it wrote could leave `rl:{id}:d` without one (a write-back
-- across a 15-minute boundary, a give-back into a past day bucket, a first call that only counted a 429):
-- a hash a consumer that never returns keeps forever. Atomic, so a grant call running between a scan and
-- this fix cannot have its later expiry overwritten: only a hash with no expiry now is touched.
-- KEYS[1]  rl:{id}:d — the day hash
-- KEYS[2]  rl:{id}   — its limiter hash (field x: the expiry both share)
-- ARGV[1]  '1' to change nothing (a dry run), '0' to set the expiry
-- Reply: 0 the day hash has an expiry (or is gone): untouched; 1 no expiry, given its limiter hash's x;
--        2 no expiry and no x (the limiter hash gone): given a day from now, when nothing in it can count
local DAY_MS = 86400000
if redis.call('PTTL', KEYS[1]) ~= -1 then return 0 end
local expiry = redis.call('HGET', KEYS[2], 'x')
local kind = 1
if not expiry then
  local clock = redis.call('TIME')
  expiry = string.format('%d', clock[1] * 1000 + math.floor(clock[2] / 1000) + DAY_MS)
  kind = 2
end
if ARGV[1] == '0' then redis.call('PEXPIREAT', KEYS[1], expiry) end
return kind
