-- grant: count before admit. Per entry (one id's requests waiting in one process), atomically at one Redis TIME: answer
-- a ban without counting; else apply the adjustments, count in every window (minute, day, month) the units of the
-- requests that fit, each whole or not at all, plus `extra` the process spends until the minute bucket ends (a block),
-- and set its reserve (kept back from everyone else, spent only while Redis does not answer). A request that does not
-- fit is a 429, counted under the ban policy unless the month refused it. Layout and proof: docs/limiter-internals.md.
-- KEYS[2i-1]  rl:{id}    t, n, o minute ring (newest bucket, units in window, oldest bucket with units), '0'..'60' its
--                        buckets; D, N, O, c the day ring's (c: bucket D's units); Q, q month, units; b, e, l ban end,
--                        last ban's end, level; k recent 429s 'ms:n,…'; r reserves 'holder,units,untilMs;…'; p blocks
--                        held 'holder,minuteBucket,units;…' (granted in the current minute bucket or the one before, not
--                        given back yet); x expiry (Unix ms); L lapsed
--                        reserves charged to the day and month 'holder,units,dayBucket,month;…' (taken back when
--                        their holder calls again: its write-backs count what it spent)
-- KEYS[2i]    rl:{id}:d  the day ring's buckets before D, '0'..'96'
-- ARGV[1]     the caller's holder id
-- ARGV[3i-1]  'minuteLimit dayLimit monthLimit requests cost extra reserve write soft mb mine' (monthLimit 0: none;
--             write 0: a read, changing nothing; soft 1: the month never refuses; mine: the blocks the caller still holds
--             in minute bucket mb, 0 once it gave them back)
-- ARGV[3i]    ban policy 'threshold,windowMs,durationMs,maxMs', or '' (never banned)
-- ARGV[3i+1]  adjustments 'minuteBucket,dayBucket,month,delta;…', applied first (bucket 0: none); a delta ending in
--             'a' writes back an outage-allowance admission (not spent from the caller's reserve)
-- Reply: { now, then per entry: outcome (0 ok, 1 rate_limited, 2 banned), admitted, the rejected request that started a
--          ban (1-based; 0 none), extra, the caller's reserve, every reserve, then for minute, day, month: units, reset
--          ms, retry ms (0 unless rejected); ban's end; the blocks other processes hold (this minute bucket's and the
--          last one's not yet given back) }
-- A write never lowers the caller's reserve below min(its reserve less what the call writes back, `reserve` asked):
-- applied or not, the caller knows what it may spend. A bucket's field holds tag × scale + units (tag: its index mod
-- `mod`), so a stale field reads as empty. Numbers are floored and written with %d or %.0f: the same under Lua 5.1
-- (Redis) and 5.4 (the simulator).
-- The fields of rl:{id}, as src/gateway/limiter/redis/layout.ts names them (a test checks they are the same).
local FIELD = {
  minute_newest = 't', minute_units = 'n', minute_oldest = 'o',
  day_newest = 'D', day_units = 'N', day_oldest = 'O', day_newest_units = 'c',
  month = 'Q', month_units = 'q',
  ban_end = 'b', last_ban_end = 'e', ban_level = 'l', recent_rejections = 'k',
  reserves = 'r', blocks = 'p', expiry = 'x', lapsed_reserves = 'L'
}
local MR = { ms = 1000.0, slots = 61, mod = 2 ^ 20, scale = 2 ^ 32 }
local DR = { ms = 900000.0, slots = 97, mod = 2 ^ 13, scale = 2 ^ 40 }
local ESCALATION_MS, RESERVE_TTL_MS = 86400000, 120000
local floor, min, max, fmt = math.floor, math.min, math.max, string.format

local t = redis.call('TIME')
local now = t[1] * 1000.0 + floor(t[2] / 1000)
local mb, db = floor(now / MR.ms), floor(now / DR.ms)

-- Units of bucket j of ring R in a field value v (0 when v is another bucket's, or missing).
local function units (v, j, R)
  if not v then return 0 end
  local u = (v + 0) % R.scale
  return (v - u) / R.scale == j % R.mod and u or 0
end

-- The units of buckets from..to of ring R (a table bucket → units), read in one HMGET.
local function read (key, from, to, R)
  local names, out = {}, {}
  for j = from, to do names[#names + 1] = '' .. j % R.slots end
  if #names == 0 then return out end
  local v = redis.call('HMGET', key, unpack(names))
  for j = from, to do out[j] = units(v[j - from + 1], j, R) end
  return out
end

-- Adds delta to bucket j of ring R (newest bucket `last` holding `cur`, `total` units from `old`):
-- into the newest (a bucket ahead of Redis's clock is counted now: later, so safe), or read,
-- changed and written back; a bucket out of the window is skipped. Returns total, old, cur.
local function adjust (key, R, j, delta, last, cur, total, old)
  if j >= last then local v = max(0, cur + delta); return total + v - cur, old, v end
  if j <= last - R.slots or j <= 0 then return total, old, cur end
  local u = read(key, j, j, R)[j]
  local v = max(0, u + delta)
  redis.call('HSET', key, '' .. j % R.slots, (j % R.mod) * R.scale + v)
  return total + v - u, min(old or j, j), cur
end

-- Ring R moved on to bucket b from its newest `last`: what left the window leaves `total` and `old`.
local function slide (key, R, b, last, total, old)
  if not old or old > b - R.slots then return total, old end
  if last <= b - R.slots then return 0, nil end
  for _, u in pairs(read(key, old, b - R.slots, R)) do total = total - u end
  return total, b - R.slots + 1
end

-- When ring R's oldest units leave the window (reset); when enough have left for `need` (retry).
local function reset_of (old, total, R)
  if total > 0 and old then return (old + R.slots) * R.ms end
  return now + (R.slots - 1) * R.ms
end
local function retry_of (old, last, need, key, R, last_units)
  if need <= 0 then return 0 end
  local freed, buckets = 0, read(key, old or last, last - 1, R)
  for j = old or last, last do
    freed = freed + (j == last and last_units or buckets[j])
    if freed >= need then return (j + R.slots) * R.ms end
  end
  return now + MR.ms -- what blocks is kept back, not counted: asked again within a second
end

-- Calendar month (UTC) of Unix ms as year * 12 + month - 1, and the Unix ms the next one starts
-- (civil from days, H. Hinnant's algorithm, on a March-based year).
local function month_of (ms)
  local days = floor(ms / 86400000)
  local z = days + 719468
  local era = floor(z / 146097)
  local doe = z - era * 146097
  local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
  local mp = floor((5 * doy + 2) / 153)
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400 + (m <= 2 and 1 or 0)
  local len = ({ 31, (y % 4 == 0 and (y % 100 ~= 0 or y % 400 == 0)) and 29 or 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 })[m]
  return y * 12 + m - 1, (days - (doy - floor((153 * mp + 2) / 5)) + len) * 86400000.0
end

local qm, q_end = -1, 0
local reply = { now }
for i = 1, floor(#KEYS / 2) do
  local key, dkey, a = KEYS[2 * i - 1], KEYS[2 * i], 3 * i - 1
  local ml, dl, ql, n, cost, extra, want, write, soft, own_bucket, own_blocks = string.match(ARGV[a], '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d) (%d) (%-?%d+) (%d+)$')
  ml, dl, ql, n, cost, extra, want, write, soft, own_bucket, own_blocks = ml + 0, dl + 0, ql + 0, n + 0, cost + 0, extra + 0, want + 0, write == '1', soft == '1', floor(own_bucket), own_blocks + 0
  local policy, adjs = ARGV[a + 1], ARGV[a + 2]
  local f = redis.call('HMGET', key, FIELD.minute_newest, FIELD.minute_units, FIELD.minute_oldest, '' .. mb % MR.slots,
    FIELD.day_newest, FIELD.day_units, FIELD.day_oldest, FIELD.day_newest_units, FIELD.ban_end, FIELD.reserves, FIELD.expiry,
    FIELD.blocks, FIELD.lapsed_reserves)
  local ban_until = (f[9] or 0) + 0
  local entry
  if write and policy ~= '' and ban_until > now then
    entry = { 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, ban_until, 0 }
  else
    -- The minute ring at bucket m (a clock behind the newest bucket counts into it: later, safe).
    local mt, mn, mo, m, cur = mb, 0, nil, mb, 0
    if f[1] then
      mt, mn, mo = floor(f[1]), f[2] + 0, f[3] and floor(f[3])
      if mb == mt then cur = units(f[4], mb, MR)
      elseif mb < mt then m = mt; cur = units(redis.call('HGET', key, '' .. mt % MR.slots), mt, MR)
      else mn, mo = slide(key, MR, mb, mt, mn, mo) end
    end
    -- The day ring at bucket d: bucket D's units move from c into the day hash as it ends.
    local dd, dn, do_, d, dcur, day_moved = db, 0, nil, db, 0, nil
    if f[5] then
      dd, dn, do_ = floor(f[5]), f[6] + 0, f[7] and floor(f[7])
      if db <= dd then d, dcur = dd, (f[8] or 0) + 0
      else
        if (f[8] or 0) + 0 > 0 and dd > db - DR.slots then day_moved = { '' .. dd % DR.slots, (dd % DR.mod) * DR.scale + f[8] } end
        dn, do_ = slide(dkey, DR, db, dd, dn, do_) -- bucket dd is in c, never read: dd > db - DR.slots here
      end
    end
    local qc, q_on = 0, ql > 0
    if q_on then
      if qm < 0 then qm, q_end = month_of(now) end
      local q = redis.call('HMGET', key, FIELD.month, FIELD.month_units)
      if q[1] and floor(q[1]) == qm then qc = q[2] + 0 end
    end
    local changed, written = false, 0
    -- Adjustments (rare). What they add was admitted from the caller's reserve (or is a re-seed,
    -- when it has none): its reserve shrinks by as much; the outage allowance's ('a') does not.
    for aj, ad, aq, delta, kind in string.gmatch(adjs, '(%d+),(%d+),(%d+),(-?%d+)(a?)') do
      aj, ad, aq, delta = floor(aj), floor(ad), floor(aq), delta + 0
      if delta > 0 and kind == '' then written = written + delta end
      mn, mo, cur = adjust(key, MR, aj, delta, m, cur, mn, mo)
      dn, do_, dcur = adjust(dkey, DR, ad, delta, d, dcur, dn, do_)
      if q_on and aq > 0 and aq >= qm then qc = max(0, qc + delta) end
      changed = true
    end
    -- Lapsed reserves: the caller's charge is taken back (what it spent comes in its write-backs);
    -- others' stay charged while their day bucket is in the window (a crashed holder's may be spent).
    local lapsed, l_changed = {}, false
    for h, u, ld, lq in string.gmatch(f[13] or '', '([^,;]+),(%d+),(%d+),(%d+)') do
      u, ld, lq = u + 0, floor(ld), floor(lq)
      if h == ARGV[1] and write then
        dn, do_, dcur = adjust(dkey, DR, ld, -u, d, dcur, dn, do_)
        if q_on and lq == qm then qc = max(0, qc - u) end
        l_changed, changed = true, true
      elseif ld > d - DR.slots then lapsed[#lapsed + 1] = fmt('%s,%d,%d,%d', h, u, ld, lq)
      else l_changed = true end
    end
    -- Reserves: others' are kept back; another holder's that expired is charged to the day and the
    -- month (it may have spent it before the minute window let go of it) and noted in L, then dropped.
    -- The caller's own that expired is dropped uncharged: this call's write-backs count what it spent.
    local others, holders, mine, kept, r_changed = 0, 0, 0, {}, false
    for h, u, til in string.gmatch(f[10] or '', '([^,;]+),(%d+),(%d+)') do
      u, til = u + 0, til + 0
      if til <= now and h == ARGV[1] and write then r_changed = true
      elseif til <= now then
        dn, dcur, do_, changed = dn + u, dcur + u, do_ or d, true
        if q_on then qc = qc + u end
        lapsed[#lapsed + 1], l_changed = fmt('%s,%d,%d,%d', h, u, d, q_on and qm or 0), true
      elseif h == ARGV[1] and write then mine, r_changed = u, true
      else
        kept[#kept + 1] = fmt('%s,%d,%.0f', h, u, til)
        others = others + u
        if h ~= ARGV[1] then holders = holders + 1 end
      end
    end
    local keep = max(0, min(mine - written, want))
    local room = min(ml - mn, dl - dn) - others - keep
    if q_on and not soft then room = min(room, ql - qc - others - keep) end
    -- Blocks held: granted in this minute bucket or the one before and not given back yet (a holder's give-back at
    -- its bucket's end may reach Redis after the next bucket's calls: its units are counted until then). The caller
    -- says what it holds itself (0 once given back); others' entries stay until their bucket is two seconds old.
    local blocks, elsewhere = {}, 0
    for h, hb, u in string.gmatch(f[12] or '', '([^,;]+),(%-?%d+),(%d+)') do
      hb, u = floor(hb), u + 0
      if hb >= mb - 1 and not (write and h == ARGV[1]) then
        blocks[#blocks + 1] = fmt('%s,%d,%d', h, hb, u)
        if h ~= ARGV[1] then elsewhere = elsewhere + u end
      end
    end
    local admitted, granted, reserve, spared = 0, 0, keep, 0
    if write then
      if cost <= room then admitted = min(n, floor(room / cost)) end
      room = room - admitted * cost
      granted = max(0, min(extra, floor(room / (holders + 2))))
      room = room - granted
      -- Requests refused only because units are kept back or pooled elsewhere (the window is not full) are no abuse.
      spared = min(n - admitted, floor(max(0, room + others + keep + elsewhere) / cost))
      if want > keep then reserve = keep + max(0, min(want - keep, floor(room / (holders + 2)))) end
      local add = admitted * cost + granted
      if add > 0 then
        cur, mn, mo, dcur, dn, do_, qc, changed = cur + add, mn + add, mo or m, dcur + add, dn + add, do_ or d, qc + add, true
      end
      if reserve > 0 then kept[#kept + 1] = fmt('%s,%d,%.0f', ARGV[1], reserve, now + RESERVE_TTL_MS) end
      r_changed = r_changed or reserve ~= mine
      -- The caller's blocks: those it says it still holds (in a bucket not yet two seconds old), and this grant's.
      if own_bucket < mb - 1 then own_blocks = 0 end
      if granted > 0 and own_bucket ~= mb then
        if own_blocks > 0 then blocks[#blocks + 1] = fmt('%s,%d,%d', ARGV[1], own_bucket, own_blocks) end
        own_bucket, own_blocks = mb, 0
      end
      own_blocks = own_blocks + granted
      if own_blocks > 0 then blocks[#blocks + 1] = fmt('%s,%d,%d', ARGV[1], own_bucket, own_blocks) end
    end
    local blocks_now = write and table.concat(blocks, ';') or (f[12] or '')
    -- A month out of room (this call's admissions counted) refuses: quota_exceeded, no abuse either.
    local quota_out = q_on and not soft and ql - qc < cost
    local banned_at = 0
    if write and admitted + spared < n and policy ~= '' and not quota_out then
      -- The rejected requests count as 429s: banned once more than `threshold` fall in the window.
      local threshold, window, base_ms, max_ms = string.match(policy, '^(%d+),(%d+),(%d+),(%d+)$')
      threshold, window, base_ms, max_ms = threshold + 0, window + 0, base_ms + 0, max_ms + 0
      local k = redis.call('HMGET', key, FIELD.recent_rejections, FIELD.last_ban_end, FIELD.ban_level)
      local last_end, level = (k[2] or 0) + 0, (k[3] or -1) + 0
      local recent, events = 0, {}
      for at, c in string.gmatch(k[1] or '', '(%d+):(%d+)') do
        if at + 0 > now - window then recent, events[#events + 1] = recent + c, at .. ':' .. c end
      end
      local rejected = n - admitted - spared
      if recent + rejected > threshold then
        banned_at = spared + max(1, threshold - recent + 1)
        level = now - last_end < ESCALATION_MS and level + 1 or 0
        ban_until, changed = now + (level < 40 and min(base_ms * 2 ^ level, max_ms) or max_ms), true
        redis.call('HSET', key, FIELD.ban_end, fmt('%.0f', ban_until), FIELD.last_ban_end, fmt('%.0f', ban_until), FIELD.ban_level, level,
          FIELD.recent_rejections, '')
      else
        events[#events + 1] = fmt('%.0f:%d', now, rejected)
        redis.call('HSET', key, FIELD.recent_rejections, table.concat(events, ','))
      end
    end
    if write and (changed or r_changed or blocks_now ~= (f[12] or '')) then
      -- Kept until every window lets go of what it holds: the day ring's newest bucket, a reserve's
      -- end, a ban's escalation memory (its end + ESCALATION_MS), the month's end.
      local fields = { '' .. m % MR.slots, (m % MR.mod) * MR.scale + cur, FIELD.minute_units, mn, FIELD.day_units, dn, FIELD.day_newest_units, dcur }
      if f[1] == false or m ~= mt or d ~= dd then
        fields[9], fields[10], fields[11], fields[12] = FIELD.minute_newest, m, FIELD.minute_oldest, mo or m
        fields[13], fields[14], fields[15], fields[16] = FIELD.day_newest, d, FIELD.day_oldest, do_ or d
      end
      if q_on then fields[#fields + 1], fields[#fields + 2], fields[#fields + 3], fields[#fields + 4] = FIELD.month, qm, FIELD.month_units, qc end
      if r_changed then fields[#fields + 1], fields[#fields + 2] = FIELD.reserves, table.concat(kept, ';') end
      if l_changed then fields[#fields + 1], fields[#fields + 2] = FIELD.lapsed_reserves, table.concat(lapsed, ';') end
      if blocks_now ~= (f[12] or '') then fields[#fields + 1], fields[#fields + 2] = FIELD.blocks, blocks_now end
      local expiry = (d + DR.slots) * DR.ms
      if #kept > 0 then expiry = max(expiry, now + RESERVE_TTL_MS) end
      if ban_until > 0 then expiry = max(expiry, ban_until + ESCALATION_MS) end
      if q_on and qc > 0 then expiry = max(expiry, q_end) end
      local grow = expiry > (f[11] or 0) + 0
      if grow then fields[#fields + 1], fields[#fields + 2] = FIELD.expiry, fmt('%.0f', expiry) end
      redis.call('HSET', key, unpack(fields))
      if day_moved then redis.call('HSET', dkey, day_moved[1], day_moved[2]) end
      if grow then
        redis.call('PEXPIREAT', key, fmt('%.0f', expiry))
        redis.call('PEXPIREAT', dkey, fmt('%.0f', expiry))
      end
    end
    local held, r = others + reserve, admitted < n
    entry = { r and 1 or 0, admitted, banned_at, granted, reserve, held,
      mn, reset_of(mo, mn, MR), r and retry_of(mo, m, mn + held + cost - ml, key, MR, cur) or 0,
      dn, reset_of(do_, dn, DR), r and retry_of(do_, d, dn + held + cost - dl, dkey, DR, dcur) or 0,
      qc, q_end, r and quota_out and q_end or 0, ban_until > now and ban_until or 0, elsewhere }
  end
  for j = 1, 17 do reply[#reply + 1] = entry[j] end
end
return reply
