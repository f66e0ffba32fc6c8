-- Sliding-window limiter for one key: ban check, both windows, count-if-admitted and 429/ban
-- bookkeeping in one atomic call (the only Redis command a request costs). Twin of arithmetic.ts.
--
-- KEYS (one hash tag, so one Cluster slot):
--   1 rl:{id}:m    hash: minute ring. field 't' = newest bucket index; fields '0'..'slots-1' = counts
--   2 rl:{id}:d    hash: day ring, same layout
--   3 rl:{id}:ban  string: Unix ms the key's last ban ends (banned while > now); kept 24 h longer
--   4 rl:{id}:esc  string: escalation level of that ban (0: base duration), same lifetime
--   5 rl:{id}:rej  list: Unix ms of the latest 429s (at most threshold + 1), expires after the ban window
-- ARGV:
--   1 mode 'c' consume | 'p' peek (no writes)    2 perMinute    3 perDay
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
local mode = ARGV[1]
local threshold = tonumber(ARGV[4])

local now
if ARGV[8] ~= '' then
  now = tonumber(ARGV[8])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

if threshold > 0 then
  local until_ms = tonumber(redis.call('GET', KEYS[3]) or '0')
  if until_ms > now then
    return { 2, now, 0, 0, 0, 0, 0, 0, until_ms }
  end
end

local function load (key)
  local raw = redis.call('HGETALL', key)
  local counts = {}
  local last = -1
  for i = 1, #raw, 2 do
    if raw[i] == 't' then last = tonumber(raw[i + 1]) else counts[tonumber(raw[i])] = tonumber(raw[i + 1]) end
  end
  return counts, last
end

local function read (counts, last, bucket_ms, slots, limit)
  local bucket = math.floor(now / bucket_ms)
  local from = math.max(last, bucket) - slots + 1
  local count, reset, retry = 0, 0, 0
  for j = from, last do
    local c = counts[j % slots]
    if c and c > 0 then
      count = count + c
      if reset == 0 then reset = (j + slots) * bucket_ms end
    end
  end
  if reset == 0 then reset = now + (slots - 1) * bucket_ms end
  if count >= limit then
    local need, freed = count - limit + 1, 0
    for j = from, last do
      freed = freed + (counts[j % slots] or 0)
      if freed >= need then
        retry = (j + slots) * bucket_ms
        break
      end
    end
    if retry == 0 then retry = now + (slots - 1) * bucket_ms end
  end
  return count, reset, retry
end

local function add (key, counts, last, bucket_ms, slots)
  local bucket = math.floor(now / bucket_ms)
  if bucket > last then
    local stale = {}
    for j = math.max(last + 1, bucket - slots + 1), bucket - 1 do
      if counts[j % slots] then stale[#stale + 1] = j % slots end
    end
    if #stale > 0 then redis.call('HDEL', key, unpack(stale)) end
    redis.call('HSET', key, 't', bucket, bucket % slots, 1)
  else
    redis.call('HINCRBY', key, last % slots, 1)
  end
  redis.call('PEXPIRE', key, slots * bucket_ms)
end

local m_bucket, m_slots = tonumber(ARGV[9]), tonumber(ARGV[10])
local d_bucket, d_slots = tonumber(ARGV[11]), tonumber(ARGV[12])
local m_limit, d_limit = tonumber(ARGV[2]), tonumber(ARGV[3])
local m_counts, m_last = load(KEYS[1])
local d_counts, d_last = load(KEYS[2])
local mc, mr, mt = read(m_counts, m_last, m_bucket, m_slots, m_limit)
local dc, dr, dt = read(d_counts, d_last, d_bucket, d_slots, d_limit)

if mc < m_limit and dc < d_limit then
  if mode == 'c' then
    add(KEYS[1], m_counts, m_last, m_bucket, m_slots)
    add(KEYS[2], d_counts, d_last, d_bucket, d_slots)
    if mc == 0 then mr = (math.floor(now / m_bucket) + m_slots) * m_bucket end
    if dc == 0 then dr = (math.floor(now / d_bucket) + d_slots) * d_bucket end
    mc, dc = mc + 1, dc + 1
  end
  return { 0, now, mc, mr, mt, dc, dr, dt, 0 }
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
