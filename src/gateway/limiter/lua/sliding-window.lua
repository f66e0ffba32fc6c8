-- Sliding-window limiter for one consumer: ban check, both windows, count-if-admitted, 429/ban
-- bookkeeping, and block leases, in one atomic call. Twin of arithmetic.ts. The window layout is
-- baked in below (it is the same for every policy), so a call carries only what varies.
--
-- KEYS (one hash tag {id}, so one Cluster slot):
--   1 rl:{id}:m  hash: minute ring. 't' newest bucket index, 'n' running total of the stored
--                buckets, 'o' oldest non-empty bucket index, '0'..'60' counts; 'b' Unix ms the
--                consumer's ban ends (read with the ring: the ban check costs no command of its own);
--                'hb','hc','hp' leaseholders of bucket hb and of the bucket before (comma lists)
--   2 rl:{id}:d  hash: day ring, same layout ('0'..'96'), no other field
--   3 rl:{id}:b  hash: ban bookkeeping. 'u' Unix ms the last ban ends, 'l' its escalation level,
--                'r0'..'r<threshold>' Unix ms of the latest 429s (a ring: 'i' next slot, 'c' filled)
-- ARGV by mode (ARGV[1]):
--   'c' consume | 'p' peek (no writes; a banned consumer's windows are read too):
--        2 perMinute  3 perDay  4 ban policy 'threshold,windowMs,durationMs,maxMs' ('' : never banned)
--   'l' lease: as 'c', and 5 block wanted (>= 1, this request included)  6 holder id (one per process)
--        7 8 9 give back first: minute bucket, day bucket, unused count of an ended lease (9 = 0: none)
--   'r' give back: 2 minute bucket  3 day bucket  4 unused count
--   'x' reset: forget both windows, the ban, its escalation and recent 429s
-- Returns ('c','p','l'): integers { outcome (0 ok, 1 rate_limited, 2 key_banned, 3 ban_started),
--   now ms, minute count, minute reset ms, minute retry ms, day count, day reset ms, day retry ms,
--   ban until ms, admissions granted (1 for 'c', the block for 'l', 0 when not admitted) }
--   'r': 0; 'x': how many of the three keys existed
--
-- Why it never over-admits: bucket j holds requests in [j*b, (j+1)*b). The count sums buckets
-- now_bucket-slots+1 .. now_bucket with slots = window/b + 1, i.e. the whole oldest bucket that
-- straddles the window's start. That is a superset of every rolling window ending now, so
-- admitting only while count < limit keeps each rolling window at <= limit; and since this runs
-- atomically on the one shared copy, concurrent gateways cannot both take the last unit. A lease of
-- k is k requests counted now in the current bucket; the gateway spends them only before that
-- bucket ends by this clock (see stores/leases.ts), so each still lands in the bucket it is counted in.
--
-- Why it is cheap: the sum is kept as the running total 'n' and only the buckets that left the
-- window since the last call are read and subtracted ('o' says where they start), so a request
-- costs TIME, one HMGET and one HSET per ring; a full read happens once per bucket boundary, and a
-- new newest bucket adds one PEXPIRE. That PEXPIRE needs no PTTL first: a ring's own earlier
-- refreshes always expire sooner, and the only longer TTL, a ban's on the minute key (it expires
-- when the ban ends, 'b'), is known from the HMGET the call already made.
local M_BUCKET, M_SLOTS, D_BUCKET, D_SLOTS = 1000, 61, 900000, 97
local ESCALATION_MS = 86400000
local mode = ARGV[1]

if mode == 'x' then
  return redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- Hands back `n` admissions counted in `bucket` that were never used, if that bucket is still stored.
local function give_back (key, bucket_ms, slots, bucket, n)
  local f = redis.call('HMGET', key, 't', 'n', 'o', bucket % slots)
  if f[1] == false then return end
  local last, total, oldest = tonumber(f[1]), tonumber(f[2]), tonumber(f[3])
  if bucket > last or bucket <= last - slots or bucket < oldest then return end
  local c = tonumber(f[4] or '0') or 0
  local k = math.min(n, c)
  if k > 0 then redis.call('HSET', key, bucket % slots, c - k, 'n', total - k) end
end

if mode == 'r' then
  local n = tonumber(ARGV[4])
  give_back(KEYS[1], M_BUCKET, M_SLOTS, tonumber(ARGV[2]), n)
  give_back(KEYS[2], D_BUCKET, D_SLOTS, tonumber(ARGV[3]), n)
  return 0
end
if mode == 'l' and ARGV[9] ~= '0' then
  local n = tonumber(ARGV[9])
  give_back(KEYS[1], M_BUCKET, M_SLOTS, tonumber(ARGV[7]), n)
  give_back(KEYS[2], D_BUCKET, D_SLOTS, tonumber(ARGV[8]), n)
end

-- A ring as this call sees it: the stored buckets still in the window, their total and oldest
-- index, and what pruning the expired ones must write back (consume mode only).
local function open (key, bucket_ms, slots, f)
  local bucket = math.floor(now / bucket_ms)
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

-- Writes back what pruning found, and counts `admit` requests in the current bucket. `keep_until`:
-- Unix ms before which the key must not expire whatever the ring needs (a ban's end; 0: none).
local function save (r, admit, keep_until)
  if r.reset_all then
    -- Every stored bucket left the window: drop them all (the hash may hold other fields).
    local fields = { 't', 'n', 'o' }
    for j = 0, r.slots - 1 do fields[#fields + 1] = j end
    redis.call('HDEL', r.key, unpack(fields))
  elseif #r.stale > 0 then
    redis.call('HDEL', r.key, unpack(r.stale))
  end
  if admit > 0 then
    if r.bucket > r.last then
      -- A new newest bucket: its slot's old content left the window (pruned above). The key is
      -- kept alive until this bucket leaves the window too, so TTL is refreshed only here.
      local oldest = r.oldest
      if r.total == 0 then oldest = r.bucket end
      redis.call('HSET', r.key, r.bucket % r.slots, admit, 't', r.bucket, 'n', r.total + admit, 'o', oldest)
      local ttl = r.slots * r.b
      if keep_until < now + ttl then redis.call('PEXPIRE', r.key, ttl) end
    elseif r.counts == nil then
      -- Nothing was pruned ('o' is as stored).
      redis.call('HSET', r.key, r.bucket % r.slots, r.current + admit, 'n', r.total + admit)
    else
      redis.call('HSET', r.key, r.bucket % r.slots, r.current + admit, 'n', r.total + admit, 'o', r.oldest)
    end
  elseif #r.stale > 0 then
    redis.call('HSET', r.key, 'n', r.total, 'o', r.oldest)
  end
end

local m_limit, d_limit = tonumber(ARGV[2]), tonumber(ARGV[3])
local policy = ARGV[4]
local m_bucket = math.floor(now / M_BUCKET)
local mf = redis.call('HMGET', KEYS[1], 't', 'n', 'o', m_bucket % M_SLOTS, 'b')
local banned_until = 0
local ban_ends = tonumber(mf[5] or '0') or 0
if policy ~= '' or mode == 'p' then
  local until_ms = ban_ends
  if until_ms > now then
    if mode ~= 'p' then return { 2, now, 0, 0, 0, 0, 0, 0, until_ms, 0 } end
    banned_until = until_ms
  end
end
local m = open(KEYS[1], M_BUCKET, M_SLOTS, mf)
local d = open(KEYS[2], D_BUCKET, D_SLOTS, redis.call('HMGET', KEYS[2], 't', 'n', 'o', math.floor(now / D_BUCKET) % D_SLOTS))
local mc, mr, mt = read(m, m_limit)
local dc, dr, dt = read(d, d_limit)

if banned_until > 0 then return { 2, now, mc, mr, mt, dc, dr, dt, banned_until, 0 } end

if mc < m_limit and dc < d_limit then
  if mode == 'p' then return { 0, now, mc, mr, mt, dc, dr, dt, 0, 0 } end
  local grant = 1
  if mode == 'l' then
    -- A fair share of the room left: split among the processes that leased this key in this
    -- bucket or the one before, with one share kept back for a process that has not asked yet.
    local room = math.min(m_limit - mc, d_limit - dc)
    local me = ARGV[6]
    local h = redis.call('HMGET', KEYS[1], 'hb', 'hc', 'hp')
    local hb = tonumber(h[1] or '-1')
    local current, previous = h[2] or '', h[3] or ''
    if hb ~= m.bucket then
      if hb == m.bucket - 1 then previous = current else previous = '' end
      current = ''
    end
    local seen, others = {}, 0
    for holder in string.gmatch(current .. ',' .. previous, '[^,]+') do
      if holder ~= me and not seen[holder] then
        seen[holder] = true
        others = others + 1
      end
    end
    if not string.find(',' .. current .. ',', ',' .. me .. ',', 1, true) then
      if current == '' then current = me else current = current .. ',' .. me end
    end
    redis.call('HSET', KEYS[1], 'hb', m.bucket, 'hc', current, 'hp', previous)
    grant = math.max(1, math.min(tonumber(ARGV[5]), math.floor(room / (others + 2))))
  end
  save(m, grant, ban_ends)
  save(d, grant, 0)
  if mc == 0 then mr = (m.bucket + m.slots) * m.b end
  if dc == 0 then dr = (d.bucket + d.slots) * d.b end
  return { 0, now, mc + grant, mr, mt, dc + grant, dr, dt, 0, grant }
end

if mode == 'p' then return { 1, now, mc, mr, mt, dc, dr, dt, 0, 0 } end
save(m, 0, ban_ends)
save(d, 0, 0)

if policy ~= '' then
  local threshold, ban_window, base_ms, max_ms = string.match(policy, '^(%d+),(%d+),(%d+),(%d+)$')
  threshold, ban_window, base_ms, max_ms = tonumber(threshold), tonumber(ban_window), tonumber(base_ms), tonumber(max_ms)
  -- The latest threshold + 1 429s in a ring of fields 'r0'..: 'i' the next slot, 'c' how many
  -- were written since the last ban (capped). Banned when the oldest of them is within the window.
  local size = threshold + 1
  local b = redis.call('HMGET', KEYS[3], 'i', 'c', 'u', 'l')
  local i, c = tonumber(b[1] or '0'), tonumber(b[2] or '0')
  local next_i = (i + 1) % size
  c = math.min(c + 1, size)
  local oldest = now
  if c == size and size > 1 then oldest = tonumber(redis.call('HGET', KEYS[3], 'r' .. next_i) or '0') end
  if c == size and now - oldest < ban_window then
    local level = 0
    local previous = tonumber(b[3] or '0')
    if now - previous < ESCALATION_MS then level = tonumber(b[4] or '-1') + 1 end
    local duration = max_ms
    if level < 40 then duration = math.min(base_ms * 2 ^ level, max_ms) end
    local until_ms = now + duration
    redis.call('HSET', KEYS[3], 'u', until_ms, 'l', level, 'c', 0, 'i', 0)
    redis.call('PEXPIRE', KEYS[3], duration + ESCALATION_MS)
    redis.call('HSET', KEYS[1], 'b', until_ms)
    if redis.call('PTTL', KEYS[1]) < duration then redis.call('PEXPIRE', KEYS[1], duration) end
    return { 3, now, mc, mr, mt, dc, dr, dt, until_ms, 0 }
  end
  redis.call('HSET', KEYS[3], 'r' .. i, now, 'i', next_i, 'c', c)
  if redis.call('PTTL', KEYS[3]) < ban_window then redis.call('PEXPIRE', KEYS[3], ban_window) end
end
return { 1, now, mc, mr, mt, dc, dr, dt, 0, 0 }
