-- Shared by write-back.lua and reseed.lua (stores/redis-scripts.ts puts it after window.lua, whose
-- layout it keeps; those two scripts add fields of their own to it, which no decision reads:
-- 'w:<holder>' in rl:{id}:m, 'f' in rl:{id}:m and rl:{id}:d, each described where written). It adds
-- admissions counted elsewhere (by a process's fallback while Redis did not answer) to the bucket
-- they belong to, keeping the ring's running total, oldest index and expiry as decide keeps them.
-- An admission is never in the future: a bucket past the current one is counted in the current
-- one (later, so never leaving the window early); one that has left the window is dropped.
local function add_at (key, bucket_ms, slots, j, n, keep_until)
  local r = open(key, bucket_ms, slots, redis.call('HMGET', key, 't', 'n', 'o', math.floor(now / bucket_ms) % slots))
  if j > r.bucket then j = r.bucket end
  if n <= 0 or j <= r.bucket - slots then return end
  if j == r.bucket then
    save(r, n, keep_until)
    return
  end
  -- An older bucket still in the window. open() pruned every stored bucket that left the window,
  -- so bucket j's slot holds bucket j's count or nothing.
  save(r, 0, keep_until)
  redis.call('HINCRBY', key, j % slots, n)
  local newest, oldest = j, j
  if r.total > 0 then
    newest = math.max(r.last, j)
    oldest = math.min(r.oldest, j)
  end
  redis.call('HSET', key, 't', newest, 'n', r.total + n, 'o', oldest)
  local ttl = (newest + slots) * bucket_ms - now
  if keep_until < now + ttl and redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
end
