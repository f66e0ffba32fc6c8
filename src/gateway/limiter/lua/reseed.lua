-- reseed: after Redis lost its data (restart without persistence), puts back what one process
-- knew of a consumer: the counts of its last reply, each as a floor — all of them in the bucket of
-- that reply, the latest they can be in, so they leave the window no earlier than they would have
-- — and its ban. Several processes re-seed the same consumer: a ring keeps the highest floor
-- applied ('f'), so floors do not add up; write-backs (write-back.lua) add on top of them.
-- KEYS: 1 rl:{id}:m  2 rl:{id}:d  3 rl:{id}:b (window.lua describes them)
-- ARGV: 1 minute bucket index  2 minute count  3 day bucket index  4 day count
--       5 Redis ms the consumer's ban ends (0: none)
-- Returns: Redis time ms
local t = redis.call('TIME')
now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ban = tonumber(ARGV[5])
if ban > now then
  -- The escalation level was lost with the data: the next ban starts at the base duration.
  redis.call('HSET', KEYS[3], 'u', ban)
  redis.call('PEXPIRE', KEYS[3], ban - now + ESCALATION_MS)
  redis.call('HSET', KEYS[1], 'b', ban)
  if redis.call('PTTL', KEYS[1]) < ban - now then redis.call('PEXPIRE', KEYS[1], ban - now) end
else
  ban = tonumber(redis.call('HGET', KEYS[1], 'b') or '0') or 0
end
local function floor_at (key, bucket_ms, slots, j, k, keep_until)
  local applied = tonumber(redis.call('HGET', key, 'f') or '0') or 0
  if k <= applied then return end
  add_at(key, bucket_ms, slots, j, k - applied, keep_until)
  redis.call('HSET', key, 'f', k)
end
floor_at(KEYS[1], M_BUCKET, M_SLOTS, tonumber(ARGV[1]), tonumber(ARGV[2]), ban)
floor_at(KEYS[2], D_BUCKET, D_SLOTS, tonumber(ARGV[3]), tonumber(ARGV[4]), 0)
for _, key in ipairs({ KEYS[1], KEYS[2] }) do
  if redis.call('PTTL', key) == -1 then redis.call('PEXPIRE', key, M_SLOTS * M_BUCKET) end
end
return now
