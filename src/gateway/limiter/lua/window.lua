-- Shared code of the limiter scripts: stores/redis-scripts.ts puts this file in front of each of
-- them (decide.lua, decide-batch.lua, peek.lua, lease.lua, give-back.lua …) when it loads them, so
-- it only defines locals and runs no command. Twin of arithmetic.ts. A script runs its body on every
-- call, and every function defined here is made anew each time (with an object per outer local it
-- uses): keep them few.
--
-- The keys every script is given share one hash tag {id}, so one Cluster slot:
--   rl:{id}:m  hash: minute ring. 't' newest bucket index, 'n' running total of the stored
--              buckets, 'o' oldest non-empty bucket index, '0'..'60' counts; 'b' Unix ms the
--              consumer's ban ends (read with the ring: the ban check costs no command of its own);
--              'hb','hc','hp' leaseholders of bucket hb and of the bucket before (comma lists)
--   rl:{id}:d  hash: day ring, same layout ('0'..'96'), no other field
--   rl:{id}:b  hash: ban bookkeeping. 'u' Unix ms the last ban ends, 'l' its escalation level,
--              'r0'..'r<threshold>' Unix ms of the latest 429s (a ring: 'i' next slot, 'c' filled)
-- A decision's reply (decide, peek, lease): integers { outcome (0 ok, 1 rate_limited,
--   2 key_banned, 3 ban_started), now ms, minute count, minute reset ms, minute retry ms, day count,
--   day reset ms, day retry ms, ban until ms, admissions granted (1 when decide admits, the block
--   when lease does, 0 when not admitted) }
--
-- Why it never over-admits: bucket j holds requests in [j*b, (j+1)*b). The count sums buckets
-- now_bucket-slots+1 .. now_bucket with slots = window/b + 1, i.e. the whole oldest bucket that
-- straddles the window's start. That is a superset of every rolling window ending now, so
-- admitting only while count < limit keeps each rolling window at <= limit; and since a script runs
-- atomically on the one shared copy, concurrent gateways cannot both take the last unit.
--
-- Why it is cheap: the sum is kept as the running total 'n' and only the buckets that left the
-- window since the last call are read and subtracted ('o' says where they start), so a request
-- costs TIME, one HMGET and one HSET per ring; a full read happens once per bucket boundary, and a
-- new newest bucket adds one PEXPIRE. That PEXPIRE needs no PTTL first: a ring's own earlier
-- refreshes always expire sooner, and the only longer TTL, a ban's on the minute key (it expires
-- when the ban ends, 'b'), is known from the HMGET the call already made.
local M_BUCKET, M_SLOTS, D_BUCKET, D_SLOTS = 1000, 61, 900000, 97
local ESCALATION_MS = 86400000

-- Redis TIME in Unix ms, the one clock of every gateway process: each script sets it first.
local now

-- A ring as this call sees it: the stored buckets still in the window, their total and oldest
-- index, and what pruning the expired ones must write back (when the call writes).
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
