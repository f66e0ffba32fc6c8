-- grant: count before admit. For each entry — one limiter id's requests waiting in one process —
-- atomically, at one Redis TIME: answer a ban without counting; else apply the entry's adjustments,
-- then count in every window (minute, day, month) the units of the requests that fit (each request
-- whole or not at all) plus `extra` units the process spends until the minute bucket ends, and set
-- the process's reserve: units kept back from everyone else, spent by that process only while Redis
-- does not answer (docs/limiter-internals.md states the invariant and proves the bound). A request
-- that does not fit is a 429, counted under the ban policy.
--
-- KEYS[2i-1]  rl:{id}    the id's hash: t, n, o minute ring (newest bucket, units in the window,
--                        oldest bucket that may hold units), '0'..'60' its buckets; D, N, O, c the
--                        day ring's (c: units of bucket D); Q, q month and its units; b, e, l ban
--                        end, last ban's end, its level; k recent 429s 'ms:n,…'; r reserves
--                        'holder,units,untilMs;…'; x the keys' expiry (Unix ms)
-- KEYS[2i]    rl:{id}:d  the day ring's buckets before D, '0'..'96'
-- ARGV[1]     the calling process's holder id
-- ARGV[3i-1]  entry i: 'minuteLimit dayLimit monthLimit requests cost extra reserve write soft'
--             (monthLimit 0: none; write 0: a read that changes nothing; soft 1: the month is
--             counted but never refuses — overage allowed, or a quota only rehearsed)
-- ARGV[3i]    entry i's ban policy 'threshold,windowMs,durationMs,maxMs', or '' (never banned)
-- ARGV[3i+1]  entry i's adjustments 'minuteBucket,dayBucket,month,delta;…', applied first:
--             write-backs and re-seeds (delta > 0), give-backs (delta < 0); bucket 0 skips a window
-- Reply: { now, then 16 integers per entry: outcome (0 ok, 1 rate_limited, 2 banned), requests
--          admitted, the rejected request that started a ban (1-based; 0 none), extra granted, the
--          caller's reserve now, units kept back (every reserve), then for minute, day, month:
--          units counted, reset ms (when it next frees capacity), retry ms (when it has room for
--          the request; 0 unless rejected); then the ban's end }
-- A write never lowers the caller's reserve below min(its reserve less what the call writes back,
-- `reserve` asked): whether or not a call was applied, the caller knows what it may spend.
--
-- A bucket's field holds tag × 2^32 + units (day: × 2^40), the tag being its index modulo 2^20
-- (2^13): a field left by a bucket that fell out of the window reads as empty, so nothing is deleted.
-- The running totals lose what leaves the window as the ring advances: a call reads a few fields.
-- Bucket indices read back are floored and numbers are written into strings with %d or %.0f, so
-- the script reads the same under Lua 5.1 (Redis, numbers are doubles) and 5.3 (the simulator's).
local M_MS, M_SLOTS, M_TAG, D_MS, D_SLOTS, D_TAG = 1000.0, 61, 2 ^ 32, 900000.0, 97, 2 ^ 40
local ESCALATION_MS, RESERVE_TTL_MS = 86400000, 120000
local floor, min, max, fmt = math.floor, math.min, math.max, string.format

local t = redis.call('TIME')
local now = t[1] * 1000.0 + floor(t[2] / 1000)
local mb, db = floor(now / M_MS), floor(now / D_MS)

-- Units of bucket j in a field value v (0 when v is another bucket's, or missing).
local function units (v, j, mod, scale)
  if not v then return 0 end
  v = v + 0
  local u = v % scale
  if (v - u) / scale ~= j % mod then return 0 end
  return u
end

-- The units of buckets from..to of a ring (a table bucket → units), read in one HMGET.
local function read (key, from, to, slots, mod, scale)
  local names, out = {}, {}
  for j = from, to do names[#names + 1] = '' .. j % slots end
  if #names == 0 then return out end
  local v = redis.call('HMGET', key, unpack(names))
  for j = from, to do out[j] = units(v[j - from + 1], j, mod, scale) end
  return out
end

-- When a ring's oldest units leave the window (reset); when enough have left for `need` (retry).
local function reset_of (oldest, total, slots, size)
  if total > 0 and oldest then return (oldest + slots) * size end
  return now + (slots - 1) * size
end
local function retry_of (oldest, last, need, key, slots, mod, scale, size, last_units)
  if need <= 0 then return 0 end
  local freed, buckets = 0, read(key, oldest or last, last - 1, slots, mod, scale)
  for j = oldest or last, last do
    freed = freed + (j == last and last_units or buckets[j])
    if freed >= need then return (j + slots) * size end
  end
  return now + M_MS -- what blocks is kept back, not counted: asked again within a second
end

-- Calendar month (UTC) of Unix ms as year * 12 + month - 1, and the Unix ms the next one starts.
local function month_of (ms)
  local z = floor(ms / 86400000) + 719468
  local era = floor(z / 146097)
  local doe = z - era * 146097
  local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
  local mp = floor((5 * (doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))) + 2) / 153)
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400 + (m <= 2 and 1 or 0)
  -- days from civil of the 1st of the next month (March-based year: the next month's mp is mp + 1)
  local ny, nmp = y - (m <= 2 and 1 or 0), mp + 1
  if nmp == 12 then ny, nmp = ny + 1, 0 end
  local nera = floor(ny / 400)
  local nyoe = ny - nera * 400
  local days = nera * 146097 + nyoe * 365 + floor(nyoe / 4) - floor(nyoe / 100) + floor((153 * nmp + 2) / 5) - 719468
  return y * 12 + m - 1, days * 86400000.0
end

local qm, q_end = -1, 0
local reply = { now }
for i = 1, floor(#KEYS / 2) do
  local key, dkey, a = KEYS[2 * i - 1], KEYS[2 * i], 3 * i - 1
  local ml, dl, ql, n, cost, extra, want, write, soft = string.match(ARGV[a], '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d) (%d)$')
  ml, dl, ql, n, cost, extra, want, write, soft = ml + 0, dl + 0, ql + 0, n + 0, cost + 0, extra + 0, want + 0, write == '1', soft == '1'
  local policy, adjust = ARGV[a + 1], ARGV[a + 2]
  local f = redis.call('HMGET', key, 't', 'n', 'o', '' .. mb % M_SLOTS, 'D', 'N', 'O', 'c', 'b', 'r', 'x')
  local ban_until = (f[9] or 0) + 0
  local entry
  if write and policy ~= '' and ban_until > now then
    entry = { 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, ban_until }
  else
    -- The minute ring at bucket m (a clock behind the newest bucket counts into it: later, safe).
    local mt, mn, mo, m, cur = mb, 0, nil, mb, 0
    if f[1] then
      mt, mn, mo = floor(f[1]), f[2] + 0, f[3] and floor(f[3])
      if mb == mt then cur = units(f[4], mb, 2 ^ 20, M_TAG)
      elseif mb < mt then m = mt; cur = units(redis.call('HGET', key, '' .. mt % M_SLOTS), mt, 2 ^ 20, M_TAG)
      elseif mo and mo <= mb - M_SLOTS then
        if mt <= mb - M_SLOTS then mn, mo = 0, nil
        else
          for _, u in pairs(read(key, mo, mb - M_SLOTS, M_SLOTS, 2 ^ 20, M_TAG)) do mn = mn - u end
          mo = mb - M_SLOTS + 1
        end
      end
    end
    -- The day ring at bucket d: bucket D's units move from c into the day hash as it ends.
    local dd, dn, do_, d, dcur, day_moved = db, 0, nil, db, 0, nil
    if f[5] then
      dd, dn, do_ = floor(f[5]), f[6] + 0, f[7] and floor(f[7])
      if db <= dd then d, dcur = dd, (f[8] or 0) + 0
      else
        if (f[8] or 0) + 0 > 0 then day_moved = { '' .. dd % D_SLOTS, (dd % 2 ^ 13) * D_TAG + f[8] } end
        if do_ and do_ <= db - D_SLOTS then
          if dd <= db - D_SLOTS then dn, do_, day_moved = 0, nil, nil
          else
            for _, u in pairs(read(dkey, do_, min(dd - 1, db - D_SLOTS), D_SLOTS, 2 ^ 13, D_TAG)) do dn = dn - u end
            do_ = db - D_SLOTS + 1
          end
        end
      end
    end
    local qc, q_on = 0, ql > 0
    if q_on then
      if qm < 0 then qm, q_end = month_of(now) end
      local q = redis.call('HMGET', key, 'Q', 'q')
      if q[1] and floor(q[1]) == qm then qc = q[2] + 0 end
    end
    local changed, written = false, 0
    -- Adjustments (rare): into the current buckets (a bucket ahead of Redis's clock is counted
    -- now: later, so safe), or read, changed and written back. What they add was admitted from
    -- the caller's reserve (or is a re-seed, when it has none): its reserve shrinks by as much.
    for aj, ad, aq, delta in string.gmatch(adjust, '(%d+),(%d+),(%d+),(-?%d+)') do
      aj, ad, aq, delta = floor(aj), floor(ad), floor(aq), delta + 0
      if delta > 0 then written = written + delta end
      if aj >= m then local v = max(0, cur + delta); mn, cur = mn + v - cur, v
      elseif aj > m - M_SLOTS and aj > 0 and aj < m then
        local u = read(key, aj, aj, M_SLOTS, 2 ^ 20, M_TAG)[aj]
        local v = max(0, u + delta)
        mn, mo = mn + v - u, min(mo or aj, aj)
        redis.call('HSET', key, '' .. aj % M_SLOTS, (aj % 2 ^ 20) * M_TAG + v)
      end
      if ad >= d then local v = max(0, dcur + delta); dn, dcur = dn + v - dcur, v
      elseif ad > d - D_SLOTS and ad > 0 and ad < d then
        local u = read(dkey, ad, ad, D_SLOTS, 2 ^ 13, D_TAG)[ad]
        local v = max(0, u + delta)
        dn, do_ = dn + v - u, min(do_ or ad, ad)
        redis.call('HSET', dkey, '' .. ad % D_SLOTS, (ad % 2 ^ 13) * D_TAG + v)
      end
      if q_on and aq > 0 and aq >= qm then qc = max(0, qc + delta) end
      changed = true
    end
    -- Reserves: others' are kept back; an expired one is charged to the day and the month (its
    -- holder may have spent it before the minute window let go of it), then dropped.
    local others, holders, mine, kept, r_changed = 0, 0, 0, {}, false
    for h, u, til in string.gmatch(f[10] or '', '([^,;]+),(%d+),(%d+)') do
      u, til = u + 0, til + 0
      if til <= now then
        dn, dcur, do_, changed = dn + u, dcur + u, do_ or d, true
        if q_on then qc = qc + u end
      elseif h == ARGV[1] and write then mine, r_changed = u, true
      else
        kept[#kept + 1] = fmt('%s,%d,%.0f', h, u, til)
        others = others + u
        if h ~= ARGV[1] then holders = holders + 1 end
      end
    end
    local keep = max(0, min(mine - written, want))
    local room = min(ml - mn, dl - dn) - others - keep
    -- A month out of room refuses (quota_exceeded), and such a refusal is no abuse: no 429 counted.
    local quota_out = q_on and not soft and ql - qc - others - keep < cost
    if q_on and not soft then room = min(room, ql - qc - others - keep) end
    local admitted, granted, reserve = 0, 0, keep
    if write then
      if cost <= room then admitted = min(n, floor(room / cost)) end
      room = room - admitted * cost
      granted = max(0, min(extra, floor(room / (holders + 2))))
      room = room - granted
      if want > keep then reserve = keep + max(0, min(want - keep, floor(room / (holders + 2)))) end
      local add = admitted * cost + granted
      if add > 0 then
        cur, mn, mo, dcur, dn, do_, qc, changed = cur + add, mn + add, mo or m, dcur + add, dn + add, do_ or d, qc + add, true
      end
      if reserve > 0 then kept[#kept + 1] = fmt('%s,%d,%.0f', ARGV[1], reserve, now + RESERVE_TTL_MS) end
      r_changed = r_changed or reserve ~= mine
    end
    local banned_at = 0
    if write and admitted < n and policy ~= '' and not quota_out then
      -- The rejected requests count as 429s: banned once more than `threshold` fall in the window.
      local threshold, window, base_ms, max_ms = string.match(policy, '^(%d+),(%d+),(%d+),(%d+)$')
      threshold, window, base_ms, max_ms = threshold + 0, window + 0, base_ms + 0, max_ms + 0
      local k = redis.call('HMGET', key, 'k', 'e', 'l')
      local last_end, level = (k[2] or 0) + 0, (k[3] or -1) + 0
      local recent, events = 0, {}
      for at, c in string.gmatch(k[1] or '', '(%d+):(%d+)') do
        if at + 0 > now - window then recent, events[#events + 1] = recent + c, at .. ':' .. c end
      end
      local rejected = n - admitted
      if recent + rejected > threshold then
        banned_at = max(1, threshold - recent + 1)
        if now - last_end < ESCALATION_MS then level = level + 1 else level = 0 end
        local duration = max_ms
        if level < 40 then duration = min(base_ms * 2 ^ level, max_ms) end
        ban_until, changed = now + duration, true
        redis.call('HSET', key, 'b', fmt('%.0f', ban_until), 'e', fmt('%.0f', ban_until), 'l', level, 'k', '')
      else
        events[#events + 1] = fmt('%.0f:%d', now, rejected)
        redis.call('HSET', key, 'k', table.concat(events, ','))
      end
    end
    if write and (changed or r_changed) then
      -- Kept until every window has let go of what it holds: the day ring's newest bucket, a
      -- reserve's end, a ban's escalation memory, the month's end.
      local fields = { '' .. m % M_SLOTS, (m % 2 ^ 20) * M_TAG + cur, 'n', mn, 'N', dn, 'c', dcur }
      if f[1] == false or m ~= mt or d ~= dd then
        fields[9], fields[10], fields[11], fields[12], fields[13], fields[14], fields[15], fields[16] = 't', m, 'o', mo or m, 'D', d, 'O', do_ or d
      end
      if q_on then fields[#fields + 1], fields[#fields + 2], fields[#fields + 3], fields[#fields + 4] = 'Q', qm, 'q', qc end
      if r_changed then fields[#fields + 1], fields[#fields + 2] = 'r', table.concat(kept, ';') end
      -- A ban's escalation memory is its own end + ESCALATION_MS: set with the ban (below).
      local expiry = (d + D_SLOTS) * D_MS
      if #kept > 0 then expiry = max(expiry, now + RESERVE_TTL_MS) end
      if ban_until > 0 then expiry = max(expiry, ban_until + ESCALATION_MS) end
      if q_on and qc > 0 then expiry = max(expiry, q_end) end
      local grow = expiry > (f[11] or 0) + 0
      if grow then fields[#fields + 1], fields[#fields + 2] = 'x', fmt('%.0f', expiry) end
      redis.call('HSET', key, unpack(fields))
      if day_moved then redis.call('HSET', dkey, day_moved[1], day_moved[2]) end
      if grow then
        redis.call('PEXPIREAT', key, fmt('%.0f', expiry))
        redis.call('PEXPIREAT', dkey, fmt('%.0f', expiry))
      end
    end
    local held = others + reserve
    local r = admitted < n
    entry = { r and 1 or 0, admitted, banned_at, granted, reserve, held,
      mn, reset_of(mo, mn, M_SLOTS, M_MS), r and retry_of(mo, m, mn + held + cost - ml, key, M_SLOTS, 2 ^ 20, M_TAG, M_MS, cur) or 0,
      dn, reset_of(do_, dn, D_SLOTS, D_MS), r and retry_of(do_, d, dn + held + cost - dl, dkey, D_SLOTS, 2 ^ 13, D_TAG, D_MS, dcur) or 0,
      qc, q_end, r and quota_out and q_end or 0, ban_until > now and ban_until or 0 }
  end
  for j = 1, 16 do reply[#reply + 1] = entry[j] end
end
return reply
