-- Shared by lease.lua and give-back.lua (stores/redis-scripts.ts puts it after window.lua).
-- Hands back `n` admissions an ended lease counted in `bucket` but never used, if that bucket is
-- still stored (a bucket that left its window took them with it).
local function give_back (key, slots, bucket, n)
  local f = redis.call('HMGET', key, 't', 'n', 'o', bucket % slots)
  if f[1] == false then return end
  local last, total, oldest = tonumber(f[1]), tonumber(f[2]), tonumber(f[3])
  if bucket > last or bucket <= last - slots or bucket < oldest then return end
  local c = tonumber(f[4] or '0') or 0
  local k = math.min(n, c)
  if k > 0 then redis.call('HSET', key, bucket % slots, c - k, 'n', total - k) end
end
