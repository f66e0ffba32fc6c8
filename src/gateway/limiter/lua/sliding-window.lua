-- Sliding-window limiter for one key: ban check, both windows, count-if-admitted and 429/ban
-- bookkeeping in one atomic call (the only Redis command a request costs). Twin of arithmetic.ts.
--
-- KEYS (one hash tag, so one Cluster slot):
--   1 rl:{id}:m    hash: minute ring. 't' = newest bucket index, 'n' = running total of the stored
--                  buckets, 'o' = oldest non-empty bucket index; fields '0'..'slots-1' = counts
--   2 rl:{id}:d    hash: day ring, same layout
--   3 rl:{id}:ban  string: Unix ms the key's last ban ends (banned while > now); kept 24 h longer
--   4 rl:{id}:esc  string: escalation level of that ban (0: base duration), same lifetime
--   5 rl:{id}:rej  list: Unix ms of the latest 429s (at most threshold + 1), expires after the ban window
-- ARGV:
--   1 mode 'c' consume | 'p' peek (no writes; a banned key's windows are read too)    2 perMinute    3 perDay
--   4 ban threshold (0: no bans, anonymous)      5 ban window ms   6 ban duration ms   7 ban max ms
--   8 clock override ms, '' = Redis TIME (tests only)
--   9 minute bucket ms  10 minute slots  11 day bucket ms  12 day slots
-- Returns integers: { outcome (0 ok, 1 rate_limited, 2 key_banned, 3 ban_started), now ms,
--   minute count, minute reset ms, minute retry ms, day count, day reset ms, day retry ms, ban until ms }
--
-- Why it never over-admits: bucket j holds requests in [j*b, (j+1)*b). The count sums buckets
-- now_bucket-slots+1 .. now_bucket with slots = window/b + 1, i.e. the whole oldest bucket that
-- straddles the window's start. That is a superset of every rolling window ending now, so
-- admitting only while count < limit keeps each rolling window at <= limit; and since this runs
-- atomically on the one shared copy, concurrent gateways cannot both take the last unit.
--
-- Why it is cheap: the sum is kept as the running total 'n' and only the buckets that left the
-- window since the last call are read and subtracted ('o' says where they start), so a request
-- reads three fields per ring; a full read happens once per bucket boundary, not per request.
local mode = ARGV[1]
local threshold = tonumber(ARGV[4])

local now
if ARGV[8] ~= '' then
  now = tonumber(ARGV[8])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local banned_until = 0
if threshold > 0 then
  local until_ms = tonumber(redis.call('GET', KEYS[3]) or '0')
  if until_ms > now then
    if mode == 'c' then return { 2, now, 0, 0, 0, 0, 0, 0, until_ms } end
    banned_until = until_ms
  end
end

-- A ring as this call sees it: the stored buckets still in the window, their total and oldest
-- index, and what pruning the expired ones must write back (consume mode only).
local function open (key, bucket_ms, slots)
  local bucket = math.floor(now / bucket_ms)
  local f = redis.call('HMGET', key, 't', 'n', 'o', bucket % slots)
  local r = { key = key, b = bucket_ms, slots = slots, bucket = bucket, last = -1, total = 0, oldest = -1, current = 0, stale = {}, counts = nil, reset_all = false }
  if f[1] == false then return r end
  r.last, r.total, r.oldest = tonumber(f[1]), tonumber(f[2]), tonumber(f[3])
  -- The current bucket's slot holds this bucket's count only if this bucket is the newest stored one.
  if bucket == r.last then r.current = tonumber(f[4] or '0') or 0 end
  if bucket < r.last then
    -- A clock behind the newest bucket (failover to a skewed replica): count into the newest
    -- bucket, which leaves the window later, so the error can only be towards under-admission.
    r.bucket = r.last
    r.current = tonumber(redis.call('HGET', key, r.last % slots) or '0') or 0
  end
  local from = math.max(r.last, bucket) - slots + 1
  if r.total > 0 and r.oldest < from then
    if r.last < from then
      r.total, r.oldest, r.last, r.reset_all = 0, -1, -1, true
      return r
    end
    local fields = {}
    for j = r.oldest, r.last do fields[#fields + 1] = j % slots end
    local values = redis.call('HMGET', key, unpack(fields))
    r.counts = {}
    local kept_oldest = -1
    for i = 1, #fields do
      local j = r.oldest + i - 1
      local c = tonumber(values[i] or '0') or 0
      if j < from then
        if c > 0 then
          r.total = r.total - c
          r.stale[#r.stale + 1] = j % slots
        end
      elseif c > 0 then
        r.counts[j] = c
        if kept_oldest < 0 then kept_oldest = j end
      end
    end
    r.oldest = kept_oldest
  end
  return r
end

-- count, reset and (when full) retry of a ring, as the rolling window ending now sees it.
local function read (r, limit)
  local count = r.total
  local reset
  if count > 0 then reset = (r.oldest + r.slots) * r.b else reset = now + (r.slots - 1) * r.b end
  local retry = 0
  if count >= limit then
    local need = count - limit + 1
    if need == 1 then
      retry = reset
    else
      if r.counts == nil then
        local fields = {}
        for j = r.oldest, r.last do fields[#fields + 1] = j % r.slots end
        local values = redis.call('HMGET', r.key, unpack(fields))
        r.counts = {}
        for i = 1, #fields do r.counts[r.oldest + i - 1] = tonumber(values[i] or '0') or 0 end
      end
      local freed = 0
      for j = r.oldest, r.last do
        freed = freed + (r.counts[j] or 0)
        if freed >= need then
          retry = (j + r.slots) * r.b
          break
        end
      end
      if retry == 0 then retry = now + (r.slots - 1) * r.b end
    end
  end
  return count, reset, retry
end

-- Writes back what pruning found, and with `admit` counts this request in the current bucket.
local function save (r, admit)
  if r.reset_all then
    redis.call('DEL', r.key)
  elseif #r.stale > 0 then
    redis.call('HDEL', r.key, unpack(r.stale))
  end
  if admit then
    if r.bucket > r.last then
      -- A new newest bucket: its slot's old content left the window (pruned above). The key is
      -- kept alive until this bucket leaves the window too, so TTL is refreshed only here.
      local oldest = r.oldest
      if r.total == 0 then oldest = r.bucket end
      redis.call('HSET', r.key, r.bucket % r.slots, 1, 't', r.bucket, 'n', r.total + 1, 'o', oldest)
      redis.call('PEXPIRE', r.key, r.slots * r.b)
    else
      redis.call('HSET', r.key, r.bucket % r.slots, r.current + 1, 'n', r.total + 1, 'o', r.oldest)
    end
  elseif #r.stale > 0 then
    redis.call('HSET', r.key, 'n', r.total, 'o', r.oldest)
  end
end

local m_limit, d_limit = tonumber(ARGV[2]), tonumber(ARGV[3])
local m = open(KEYS[1], tonumber(ARGV[9]), tonumber(ARGV[10]))
local d = open(KEYS[2], tonumber(ARGV[11]), tonumber(ARGV[12]))
local mc, mr, mt = read(m, m_limit)
local dc, dr, dt = read(d, d_limit)

if banned_until > 0 then return { 2, now, mc, mr, mt, dc, dr, dt, banned_until } end

if mc < m_limit and dc < d_limit then
  if mode == 'c' then
    save(m, true)
    save(d, true)
    if mc == 0 then mr = (m.bucket + m.slots) * m.b end
    if dc == 0 then dr = (d.bucket + d.slots) * d.b end
    mc, dc = mc + 1, dc + 1
  end
  return { 0, now, mc, mr, mt, dc, dr, dt, 0 }
end

if mode == 'c' then
  save(m, false)
  save(d, false)
end

if mode == 'c' and threshold > 0 then
  local ban_window = tonumber(ARGV[5])
  local n = redis.call('RPUSH', KEYS[5], now)
  if n > threshold then
    redis.call('LTRIM', KEYS[5], -(threshold + 1), -1)
    if now - tonumber(redis.call('LINDEX', KEYS[5], 0)) < ban_window then
      local level = 0
      local previous = tonumber(redis.call('GET', KEYS[3]) or '0')
      if now - previous < 86400000 then level = tonumber(redis.call('GET', KEYS[4]) or '-1') + 1 end
      local duration = tonumber(ARGV[7])
      if level < 40 then duration = math.min(tonumber(ARGV[6]) * 2 ^ level, duration) end
      local until_ms = now + duration
      redis.call('SET', KEYS[3], until_ms, 'PX', duration + 86400000)
      redis.call('SET', KEYS[4], level, 'PX', duration + 86400000)
      redis.call('DEL', KEYS[5])
      return { 3, now, mc, mr, mt, dc, dr, dt, until_ms }
    end
  end
  redis.call('PEXPIRE', KEYS[5], ban_window)
end
return { 1, now, mc, mr, mt, dc, dr, dt, 0 }
