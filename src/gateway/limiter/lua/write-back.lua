-- write back: adds a process's fallback admissions (counted while Redis did not answer) to the
-- buckets they belong to, once: the batch's sequence number is kept per process beside the minute
-- ring ('w:<holder>'), and a batch whose number is not above it was applied already (a retry
-- whose first answer was lost) and changes nothing.
-- KEYS: 1 rl:{id}:m  2 rl:{id}:d (window.lua describes them)
-- ARGV: 1 holder id (one per process)  2 sequence number of the batch
--       3.. triples: minute bucket index (-1: none, out of the minute window), day bucket index, admissions
-- Returns: { 1 applied now | 0 applied before, Redis time ms }
local t = redis.call('TIME')
now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local m_key, d_key = KEYS[1], KEYS[2]
local mark = 'w:' .. ARGV[1]
local seq = tonumber(ARGV[2])
local mf = redis.call('HMGET', m_key, mark, 'b')
if seq <= (tonumber(mf[1] or '0') or 0) then return { 0, now } end
local ban_ends = tonumber(mf[2] or '0') or 0
for i = 3, #ARGV, 3 do
  local minute, day, n = tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  if minute >= 0 then add_at(m_key, M_BUCKET, M_SLOTS, minute, n, ban_ends) end
  add_at(d_key, D_BUCKET, D_SLOTS, day, n, 0)
end
redis.call('HSET', m_key, mark, seq)
-- The mark must outlive any retry (seconds), not the ring: a key with no other field expires with it.
if redis.call('PTTL', m_key) < 0 then redis.call('PEXPIRE', m_key, M_SLOTS * M_BUCKET) end
return { 1, now }
