-- grant: count before admit. Per entry (one id's requests waiting in one process), atomically at one Redis TIME: answer
-- a ban without counting; else apply the adjustments, count in every window (minute, day, month) the units of the
-- requests that fit, each whole or not at all, plus `extra` the process spends until the minute bucket ends (a block),
-- and set its reserve (kept back from everyone else, spent only while Redis does not answer). A request that does not
-- fit is a 429, counted under the ban policy unless the month refused it or it is provisional (it waits for blocks held
-- elsewhere: counted only once final, and a ban that starts meanwhile does not answer it); one refused while reserves
-- kept back room that could pay for it is counted once that room is spent. Layout and proof: docs/limiter-internals.md.
-- KEYS[2i-1]  rl:{id}    t, n, o minute ring (newest bucket, units in window, oldest bucket with units), '0'..'60' its
--                        buckets; D, N, O, c the day ring's (c: bucket D's units); Q, q month, units; b, e, l ban end,
--                        last ban's end, level; k recent 429s 'ms:n,…' ('ms:ns': spared for reserves, pending); r
--                        reserves 'holder,units,untilMs;…'; p blocks held 'holder,minuteBucket,units;…' (granted in the
--                        last BLOCK_HELD_BUCKETS minute buckets, not given back yet); x expiry (Unix ms); L lapsed
--                        reserves charged to the day and month 'holder,units,dayBucket,month;…' (taken back when
--                        their holder calls again: its write-backs count what it spent)
-- KEYS[2i]    rl:{id}:d  the day ring's buckets before D, '0'..'96'
--                        Both keys expire at x: a call that writes either one sets its expiry in that call
--                        (write_account), so neither outlives the windows of a consumer that never comes back.
-- ARGV[1]     the caller's holder id
-- ARGV[3i-1]  'minuteLimit dayLimit monthLimit requests cost extra reserve write soft mb mine waited' (monthLimit 0:
--             none; write 0: a read, changing nothing; soft 1: the month never refuses; mine: the blocks the caller
--             still holds in minute bucket mb, 0 once it gave them back; waited: the minute bucket since which these
--             requests ask again — their first refusal, a provisional one (they wait for blocks held elsewhere), or the
--             reply that admitted them too late to spend — or 0: asked for the first time)
-- ARGV[3i]    ban policy 'threshold,windowMs,durationMs,maxMs', or '' (never banned)
-- ARGV[3i+1]  adjustments 'minuteBucket,dayBucket,month,delta;…', applied first (bucket 0: none); a delta ending in
--             'a' writes back an outage-allowance admission (not spent from the caller's reserve)
-- Reply: { now, then per entry: outcome (0 ok, 1 rate_limited, 2 banned), admitted, the rejected request that started a
--          ban (1-based; 0 none; the first rejected ones, provisional or spared, never do), extra, the caller's reserve,
--          every reserve, then for minute, day, month: units, reset ms, retry ms (0 unless rejected); ban's end; the
--          blocks other processes hold (those of the last BLOCK_HELD_BUCKETS minute buckets not yet given back) }
-- A refusal is provisional while blocks held elsewhere could pay for it and the blocks it first saw can still be held
-- (bucket < waited + BLOCK_HELD_BUCKETS: the client's wait, src/gateway/limiter/redis/calls.ts waitsForBlocks): it is
-- not counted toward a ban, and an entry of waited requests is decided by its windows even when a ban started since
-- their first refusal (no ban was in force then: a banned key's entries are refused uncounted), adding nothing to
-- the ban's count while it is in force.
-- A write never lowers the caller's reserve below min(its reserve less what the call writes back, `reserve` asked):
-- applied or not, the caller knows what it may spend. A bucket's field holds tag × scale + units (tag: its index mod
-- `mod`), so a stale field reads as empty. Numbers are floored and written with %d: the same under Lua 5.1 (Redis)
-- and 5.4 (the simulator). Cost (docs/performance.md, bench/grant-cost.ts): in Redis's Lua, turning a number into
-- text is the dearest step — '' .. n and %.0f ~2 µs, %d ~1 µs, a number argument of redis.call ~1.5 µs (Redis
-- prints it with %.17g) — so field names are made once per call and values written as %d text.
-- The fields of rl:{id}, as src/gateway/limiter/redis/layout.ts names them (a test checks they are the same).
local FIELD = {
  minute_newest = 't', minute_units = 'n', minute_oldest = 'o',
  day_newest = 'D', day_units = 'N', day_oldest = 'O', day_newest_units = 'c',
  month = 'Q', month_units = 'q',
  ban_end = 'b', last_ban_end = 'e', ban_level = 'l', recent_rejections = 'k',
  reserves = 'r', blocks = 'p', expiry = 'x', lapsed_reserves = 'L'
}
local MR = { ms = 1000.0, slots = 61, mod = 2 ^ 20, scale = 2 ^ 32, names = {} }
local DR = { ms = 900000.0, slots = 97, mod = 2 ^ 13, scale = 2 ^ 40, names = {} }
local ESCALATION_MS, RESERVE_TTL_MS = 86400000, 120000
local BLOCK_HELD_BUCKETS = 3
local floor, min, max, fmt = math.floor, math.min, math.max, string.format

local CALLER = ARGV[1]
local clock = redis.call('TIME')
local now = clock[1] * 1000.0 + floor(clock[2] / 1000)
local minute_bucket, day_bucket = floor(now / MR.ms), floor(now / DR.ms)

-- The field of bucket `bucket` in ring `shape` ('0'..'60', '0'..'96'), its text made once per call (shape.names).
local function slot_name (bucket, shape)
  local slot = bucket % shape.slots
  local name = shape.names[slot]
  if not name then name = fmt('%d', slot); shape.names[slot] = name end
  return name
end

-- Units of bucket `bucket` of ring `shape` in a field value (0 when the value is another bucket's, or missing).
local function units (value, bucket, shape)
  if not value then return 0 end
  local stored = (value + 0) % shape.scale
  return (value - stored) / shape.scale == bucket % shape.mod and stored or 0
end

-- The units of buckets from..to of ring `shape` (a table bucket → units), read in one HMGET.
local function read (key, from, to, shape)
  local names, out = {}, {}
  for bucket = from, to do names[#names + 1] = slot_name(bucket, shape) end
  if #names == 0 then return out end
  local values = redis.call('HMGET', key, unpack(names))
  for bucket = from, to do out[bucket] = units(values[bucket - from + 1], bucket, shape) end
  return out
end

-- A ring as one entry sees it: { key, shape (MR or DR), newest bucket, newest_units (the newest bucket's units),
-- units in the window, oldest bucket with units, stored_newest (the newest bucket the hash held), written (adjust
-- wrote a bucket of it: its key needs its expiry) }.

-- Adds delta to a bucket of the ring: into the newest (a bucket ahead of Redis's clock is counted now: later, so
-- safe), or read, changed and written back; a bucket out of the window is skipped. `known`: the bucket's field as the
-- entry already read it (false: missing; nil: not read).
local function adjust (ring, bucket, delta, known)
  local shape = ring.shape
  if bucket >= ring.newest then
    local value = max(0, ring.newest_units + delta)
    ring.units, ring.newest_units = ring.units + value - ring.newest_units, value
    return
  end
  if bucket <= ring.newest - shape.slots or bucket <= 0 then return end
  -- The day bucket moving into the day hash in this call: its units are in ring.moved, not in the hash yet (written
  -- here, adjusted, instead of by write_account, which would overwrite this write with the units before it).
  if ring.moved and bucket == ring.moved_bucket then known, ring.moved = ring.moved[2], nil end
  local stored
  if known ~= nil then stored = units(known, bucket, shape) else stored = read(ring.key, bucket, bucket, shape)[bucket] end
  local value = max(0, stored + delta)
  redis.call('HSET', ring.key, slot_name(bucket, shape), fmt('%d', (bucket % shape.mod) * shape.scale + value))
  ring.written = true
  ring.units, ring.oldest = ring.units + value - stored, min(ring.oldest or bucket, bucket)
end

-- The ring moved on to `bucket` from its newest `last`: what left the window leaves its units and oldest bucket.
-- `at_bucket`: the value of bucket `bucket`'s field as the entry read it (false: missing; nil: not read) — the field
-- of bucket `bucket - slots` too, so the common slide of one bucket needs no read of its own.
local function slide (ring, bucket, last, at_bucket)
  local shape, oldest = ring.shape, ring.oldest
  if not oldest or oldest > bucket - shape.slots then return end
  if last <= bucket - shape.slots then ring.units, ring.oldest = 0, nil; return end
  if oldest == bucket - shape.slots and at_bucket ~= nil then ring.units = ring.units - units(at_bucket, oldest, shape)
  else
    for _, stored in pairs(read(ring.key, oldest, bucket - shape.slots, shape)) do ring.units = ring.units - stored end
  end
  ring.oldest = bucket - shape.slots + 1
end

-- When the ring's oldest units leave the window (reset); when enough have left for `need` (retry).
local function reset_of (ring)
  local shape = ring.shape
  if ring.units > 0 and ring.oldest then return (ring.oldest + shape.slots) * shape.ms end
  return now + (shape.slots - 1) * shape.ms
end
local function retry_of (ring, need)
  if need <= 0 then return 0 end
  local shape, first, last = ring.shape, ring.oldest or ring.newest, ring.newest
  local freed, buckets = 0, read(ring.key, first, last - 1, shape)
  for bucket = first, last do
    freed = freed + (bucket == last and ring.newest_units or buckets[bucket])
    if freed >= need then return (bucket + shape.slots) * shape.ms end
  end
  return now + MR.ms -- what blocks is kept back, not counted: asked again within a second
end

-- Calendar month (UTC) of Unix ms as year * 12 + month - 1, and the Unix ms the next one starts
-- (civil from days, H. Hinnant's algorithm, on a March-based year).
local function month_of (ms)
  local days = floor(ms / 86400000)
  local shifted = days + 719468
  local era = floor(shifted / 146097)
  local doe = shifted - era * 146097
  local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
  local mp = floor((5 * doy + 2) / 153)
  local month = mp < 10 and mp + 3 or mp - 9
  local year = yoe + era * 400 + (month <= 2 and 1 or 0)
  local leap = year % 4 == 0 and (year % 100 ~= 0 or year % 400 == 0)
  local length = ({ 31, leap and 29 or 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 })[month]
  return year * 12 + month - 1, (days - (doy - floor((153 * mp + 2) / 5)) + length) * 86400000.0
end

-- This call's calendar month and when it ends, found once for every entry that has a month quota.
local calendar = { month = -1, ends = 0 }

-- Entry `index`'s request (ARGV[3i-1..3i+1]).
local function parse_request (index)
  local argv = 3 * index - 1
  local minute_limit, day_limit, month_limit, requests, cost, extra, want, write, soft, own_bucket, own_blocks, waited =
    string.match(ARGV[argv], '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d) (%d) (%-?%d+) (%d+) (%d+)$')
  return {
    minute_limit = minute_limit + 0, day_limit = day_limit + 0, month_limit = month_limit + 0, requests = requests + 0,
    cost = cost + 0, extra = extra + 0, want = want + 0, write = write == '1', soft = soft == '1',
    own_bucket = floor(own_bucket), own_blocks = own_blocks + 0, waited = floor(waited),
    policy = ARGV[argv + 1], adjustments = ARGV[argv + 2]
  }
end

-- The fields of rl:{id} an entry reads, in one HMGET (false: missing): the month's too when it has a month quota, and
-- the minute bucket of its first adjustment (a give-back's: usually the last second's), which adjust would read.
local function read_stored (key, request)
  local names = { FIELD.minute_newest, FIELD.minute_units, FIELD.minute_oldest, slot_name(minute_bucket, MR),
    FIELD.day_newest, FIELD.day_units, FIELD.day_oldest, FIELD.day_newest_units, FIELD.ban_end, FIELD.reserves,
    FIELD.expiry, FIELD.blocks, FIELD.lapsed_reserves }
  local month_on = request.month_limit > 0
  if month_on then names[14], names[15] = FIELD.month, FIELD.month_units end
  local adjusted = request.adjustments ~= '' and string.match(request.adjustments, '^(%d+),')
  if adjusted then adjusted = floor(adjusted); names[#names + 1] = slot_name(adjusted, MR) end
  local values = redis.call('HMGET', key, unpack(names))
  return {
    minute_newest = values[1], minute_units = values[2], minute_oldest = values[3], minute_bucket_units = values[4],
    day_newest = values[5], day_units = values[6], day_oldest = values[7], day_newest_units = values[8],
    ban_end = values[9], reserves = values[10], expiry = values[11], blocks = values[12] or '',
    lapsed_reserves = values[13] or '', month = month_on and values[14], month_units = month_on and values[15],
    adjusted_bucket = adjusted, adjusted_value = adjusted and values[#names]
  }
end

-- The minute ring at this call's bucket (a clock behind the newest bucket counts into it: later, safe).
local function load_minute (key, stored)
  local ring = { key = key, shape = MR, newest = minute_bucket, newest_units = 0, units = 0, oldest = nil,
    stored_newest = minute_bucket }
  if not stored.minute_newest then return ring end
  ring.stored_newest, ring.units = floor(stored.minute_newest), stored.minute_units + 0
  ring.oldest = stored.minute_oldest and floor(stored.minute_oldest)
  if minute_bucket == ring.stored_newest then ring.newest_units = units(stored.minute_bucket_units, minute_bucket, MR)
  elseif minute_bucket < ring.stored_newest then
    ring.newest = ring.stored_newest
    ring.newest_units = units(redis.call('HGET', key, slot_name(ring.stored_newest, MR)), ring.stored_newest, MR)
  else slide(ring, minute_bucket, ring.stored_newest, stored.minute_bucket_units) end
  return ring
end

-- The day ring at this call's bucket: the newest bucket's units move from their field into the day hash as it ends
-- (ring.moved: the field and value to write; ring.moved_bucket: that bucket).
local function load_day (day_key, stored)
  local ring = { key = day_key, shape = DR, newest = day_bucket, newest_units = 0, units = 0, oldest = nil,
    stored_newest = day_bucket }
  if not stored.day_newest then return ring end
  local last = floor(stored.day_newest)
  ring.stored_newest, ring.units, ring.oldest = last, stored.day_units + 0, stored.day_oldest and floor(stored.day_oldest)
  if day_bucket <= last then ring.newest, ring.newest_units = last, (stored.day_newest_units or 0) + 0
  else
    if (stored.day_newest_units or 0) + 0 > 0 and last > day_bucket - DR.slots then
      ring.moved, ring.moved_bucket = { slot_name(last, DR), fmt('%d', (last % DR.mod) * DR.scale + stored.day_newest_units) }, last
    end
    slide(ring, day_bucket, last) -- bucket `last` is in its field, never read: last > day_bucket - DR.slots here
  end
  return ring
end

-- The month's units (on: the entry has a month quota; read with the entry's other fields).
local function load_month (stored, request)
  local month = { on = request.month_limit > 0, units = 0 }
  if not month.on then return month end
  if calendar.month < 0 then calendar.month, calendar.ends = month_of(now) end
  if stored.month and floor(stored.month) == calendar.month then month.units = stored.month_units + 0 end
  return month
end

-- Adjustments (rare). What they add was admitted from the caller's reserve (or is a re-seed, when it has none): its
-- reserve shrinks by as much; the outage allowance's ('a') does not.
local function apply_adjustments (account)
  if account.request.adjustments == '' or not account.request.write then return end -- a read changes nothing
  local stored, first = account.stored, true
  for minute, day, month, delta, kind in string.gmatch(account.request.adjustments, '(%d+),(%d+),(%d+),(-?%d+)(a?)') do
    minute, day, month, delta = floor(minute), floor(day), floor(month), delta + 0
    if delta > 0 and kind == '' then account.written = account.written + delta end
    -- The first adjustment's minute bucket was read with the entry's fields, and nothing has written it since.
    local known = nil
    if first and minute == stored.adjusted_bucket then known = stored.adjusted_value end
    first = false
    adjust(account.minute, minute, delta, known)
    adjust(account.day, day, delta)
    if account.month.on and month > 0 and month >= calendar.month then
      account.month.units = max(0, account.month.units + delta)
    end
    account.changed = true
  end
end

-- Lapsed reserves: the caller's charge is taken back (what it spent comes in its write-backs); others' stay charged
-- while their day bucket is in the window (a crashed holder's may be spent).
local function take_back_lapsed (account)
  if account.stored.lapsed_reserves == '' then return end
  local day, month = account.day, account.month
  for item, holder, reserved, lapsed_day, lapsed_month in string.gmatch(account.stored.lapsed_reserves, '(([^,;]+),(%d+),(%d+),(%d+))') do
    reserved, lapsed_day, lapsed_month = reserved + 0, floor(lapsed_day), floor(lapsed_month)
    if holder == CALLER and account.request.write then
      adjust(day, lapsed_day, -reserved)
      if month.on and lapsed_month == calendar.month then month.units = max(0, month.units - reserved) end
      account.lapsed_changed, account.changed = true, true
    elseif lapsed_day > day.newest - DR.slots then
      account.lapsed[#account.lapsed + 1] = item -- as written: 'holder,units,dayBucket,month' with %d
    else account.lapsed_changed = true end
  end
end

-- Reserves: others' are kept back; another holder's that expired is charged to the day and the month (it may have
-- spent it before the minute window let go of it) and noted as lapsed, then dropped. The caller's own that expired
-- is dropped uncharged: this call's write-backs count what it spent.
local function settle_reserves (account)
  if not account.stored.reserves or account.stored.reserves == '' then return end
  local day, month, write = account.day, account.month, account.request.write
  for item, holder, reserved, until_ms in string.gmatch(account.stored.reserves, '(([^,;]+),(%d+),(%d+))') do
    reserved, until_ms = reserved + 0, until_ms + 0
    if until_ms <= now and holder == CALLER and write then account.reserves_changed = true
    elseif until_ms <= now then
      day.units, day.newest_units, day.oldest, account.changed = day.units + reserved, day.newest_units + reserved,
        day.oldest or day.newest, true
      if month.on then month.units = month.units + reserved end
      account.lapsed[#account.lapsed + 1] = fmt('%s,%d,%d,%d', holder, reserved, day.newest, month.on and calendar.month or 0)
      account.lapsed_changed = true
    elseif holder == CALLER and write then account.mine, account.reserves_changed = reserved, true
    else
      account.kept[#account.kept + 1] = item -- as written: 'holder,units,untilMs' with %d
      account.others = account.others + reserved
      if holder ~= CALLER then account.holders = account.holders + 1 end
    end
  end
end

-- The room left for this call: the windows' less what others keep back and the caller keeps of its reserve.
local function compute_room (account)
  local request, month, others = account.request, account.month, account.others
  local keep = max(0, min(account.mine - account.written, request.want))
  local room = min(request.minute_limit - account.minute.units, request.day_limit - account.day.units) - others - keep
  if month.on and not request.soft then room = min(room, request.month_limit - month.units - others - keep) end
  account.keep, account.room = keep, room
end

-- Blocks held: granted in the last BLOCK_HELD_BUCKETS minute buckets and not given back yet (a holder's give-back at
-- its bucket's end, late on a loaded process, may reach Redis after the next buckets' calls: its units are counted
-- until then). The caller says what it holds itself (0 once given back); others' entries stay until their bucket is
-- BLOCK_HELD_BUCKETS seconds old.
local function read_blocks (account)
  if account.stored.blocks == '' then return end
  local write = account.request.write
  for item, holder, held_bucket, held in string.gmatch(account.stored.blocks, '(([^,;]+),(%-?%d+),(%d+))') do
    held_bucket, held = floor(held_bucket), held + 0
    if held_bucket > minute_bucket - BLOCK_HELD_BUCKETS and not (write and holder == CALLER) then
      account.blocks[#account.blocks + 1] = item -- as written: 'holder,minuteBucket,units' with %d
      if holder ~= CALLER then account.elsewhere = account.elsewhere + held end
    end
  end
end

-- Admits the requests that fit, grants the block and sizes the caller's reserve, and counts what is added.
local function grant (account)
  local request, minute, day, month = account.request, account.minute, account.day, account.month
  local requests, cost, room, keep, share = request.requests, request.cost, account.room, account.keep, account.holders + 2
  local admitted = 0
  if cost <= room then admitted = min(requests, floor(room / cost)) end
  room = room - admitted * cost
  local granted = max(0, min(request.extra, floor(room / share)))
  room = room - granted
  -- Requests refused only because units are kept back or pooled elsewhere (the window is not full) are no abuse: those
  -- blocks held elsewhere could pay for are provisional while the blocks they first saw can still be held.
  local waited = request.waited
  local elsewhere = (waited == 0 or minute_bucket < waited + BLOCK_HELD_BUCKETS) and account.elsewhere or 0
  account.payable = floor(max(0, room + account.others + keep + elsewhere) / cost)
  account.spared = min(requests - admitted, account.payable)
  account.provisional = min(requests - admitted, floor(elsewhere / cost))
  -- A reserve grows only while the room left is at least twice the want: the caller asked for at most a quarter of the
  -- room it last saw, so less than twice means others took more than half of it since — the consumer races its limit,
  -- and a reserve started now would be kept back from their refusals (what it holds it keeps).
  local reserve = keep
  if request.want > keep and room >= 2 * request.want then
    reserve = keep + max(0, min(request.want - keep, floor(room / share)))
  end
  local add = admitted * cost + granted
  if add > 0 then
    minute.newest_units, minute.units, minute.oldest = minute.newest_units + add, minute.units + add, minute.oldest or minute.newest
    day.newest_units, day.units, day.oldest = day.newest_units + add, day.units + add, day.oldest or day.newest
    month.units, account.changed = month.units + add, true
  end
  if reserve > 0 then account.kept[#account.kept + 1] = fmt('%s,%d,%d', CALLER, reserve, now + RESERVE_TTL_MS) end
  account.reserves_changed = account.reserves_changed or reserve ~= account.mine
  account.admitted, account.granted, account.reserve, account.room = admitted, granted, reserve, room
end

-- Blocks granted to the caller per key by this call's entries so far: a later entry of the same key (another cost, or
-- requests waiting since another bucket) says what the caller held before the call, and must keep them.
local granted_in_call = {}

-- The caller's blocks: those it says it still holds (in a bucket not yet BLOCK_HELD_BUCKETS seconds old), and this call's.
local function record_own_blocks (account)
  local granted = account.granted + (granted_in_call[account.key] or 0)
  granted_in_call[account.key] = granted
  local own_bucket, own_blocks = account.request.own_bucket, account.request.own_blocks
  if own_bucket <= minute_bucket - BLOCK_HELD_BUCKETS then own_blocks = 0 end
  if granted > 0 and own_bucket ~= minute_bucket then
    if own_blocks > 0 then account.blocks[#account.blocks + 1] = fmt('%s,%d,%d', CALLER, own_bucket, own_blocks) end
    own_bucket, own_blocks = minute_bucket, 0
  end
  own_blocks = own_blocks + granted
  if own_blocks > 0 then account.blocks[#account.blocks + 1] = fmt('%s,%d,%d', CALLER, own_bucket, own_blocks) end
end

-- The rejected requests count as 429s: banned once more than `threshold` fall in the window, each ban within
-- ESCALATION_MS of the last one's end a level longer. The provisional ones (they wait for blocks held elsewhere) come
-- first and are not counted. A refusal spared otherwise (answered 429 now while reserves kept back room that could
-- have paid for it) is recorded pending ('ms:ns'): excused while the window could still pay for it — the room left,
-- the reserves kept back and the blocks held elsewhere, older pending ones first — and counted from the first call
-- with a refusal that finds that spent (the holder spent its reserve, or handed it back and it was admitted).
local function count_rejections (account)
  local request = account.request
  local threshold, window, base_ms, max_ms = string.match(request.policy, '^(%d+),(%d+),(%d+),(%d+)$')
  threshold, window, base_ms, max_ms = threshold + 0, window + 0, base_ms + 0, max_ms + 0
  local stored = redis.call('HMGET', account.key, FIELD.recent_rejections, FIELD.last_ban_end, FIELD.ban_level)
  local last_end, level = (stored[2] or 0) + 0, (stored[3] or -1) + 0
  local refused, provisional = request.requests - account.admitted, account.provisional
  local excusable = max(0, account.payable - provisional) -- what the window could still pay for, past the provisional
  local recent, pending, events = 0, 0, {}
  for at, count, spared in string.gmatch(stored[1] or '', '(%d+):(%d+)(s?)') do
    if at + 0 > now - window then
      events[#events + 1] = { at = at, count = count + 0, spared = spared == 's' }
      if spared == 's' then pending = pending + count else recent = recent + count end
    end
  end
  local converted = max(0, pending - excusable)
  local spared_now = min(refused - provisional, excusable - (pending - converted))
  account.spared = provisional + spared_now
  local rejected = refused - account.spared
  local written = {}
  for _, event in ipairs(events) do
    local count = event.count
    if event.spared and converted > 0 then
      local counted = min(converted, count)
      converted, count, recent = converted - counted, count - counted, recent + counted
      written[#written + 1] = fmt('%s:%d', event.at, counted)
    end
    if count > 0 then written[#written + 1] = fmt('%s:%d%s', event.at, count, event.spared and 's' or '') end
  end
  if rejected > 0 and recent + rejected > threshold then
    account.banned_at = account.spared + max(1, threshold - recent + 1)
    level = now - last_end < ESCALATION_MS and level + 1 or 0
    account.ban_until, account.changed = now + (level < 40 and min(base_ms * 2 ^ level, max_ms) or max_ms), true
    redis.call('HSET', account.key, FIELD.ban_end, fmt('%.0f', account.ban_until), FIELD.last_ban_end,
      fmt('%.0f', account.ban_until), FIELD.ban_level, level, FIELD.recent_rejections, '')
  else
    if rejected > 0 then written[#written + 1] = fmt('%.0f:%d', now, rejected) end
    if spared_now > 0 then written[#written + 1] = fmt('%.0f:%ds', now, spared_now) end
    local value = table.concat(written, ',')
    if value ~= (stored[1] or '') then
      redis.call('HSET', account.key, FIELD.recent_rejections, value)
      if not account.stored.expiry then account.changed = true end -- a new hash: write_account sets its expiry
    end
  end
end

-- Writes what changed (a count the hash holds already is not written again). Kept until every window lets go of what
-- it holds: the day ring's newest bucket, a reserve's end, a ban's escalation memory (its end + ESCALATION_MS), the
-- month's end. The day hash expires with it, also when the expiry does not grow and this call made the day hash.
-- Appends field `name` and its text to `fields`, the arguments of an HSET.
local function put (fields, name, text)
  local count = #fields
  fields[count + 1], fields[count + 2] = name, text
end

local function write_account (account)
  local minute, day, month, stored = account.minute, account.day, account.month, account.stored
  local fields = { slot_name(minute.newest, MR), fmt('%d', (minute.newest % MR.mod) * MR.scale + minute.newest_units) }
  if minute.units ~= (stored.minute_units or -1) + 0 then put(fields, FIELD.minute_units, fmt('%d', minute.units)) end
  if day.units ~= (stored.day_units or -1) + 0 then put(fields, FIELD.day_units, fmt('%d', day.units)) end
  if day.newest_units ~= (stored.day_newest_units or -1) + 0 then
    put(fields, FIELD.day_newest_units, fmt('%d', day.newest_units))
  end
  if stored.minute_newest == false or minute.newest ~= minute.stored_newest or day.newest ~= day.stored_newest then
    put(fields, FIELD.minute_newest, fmt('%d', minute.newest))
    put(fields, FIELD.minute_oldest, fmt('%d', minute.oldest or minute.newest))
    put(fields, FIELD.day_newest, fmt('%d', day.newest))
    put(fields, FIELD.day_oldest, fmt('%d', day.oldest or day.newest))
  end
  if month.on then
    put(fields, FIELD.month, fmt('%d', calendar.month))
    put(fields, FIELD.month_units, fmt('%d', month.units))
  end
  if account.reserves_changed then put(fields, FIELD.reserves, table.concat(account.kept, ';')) end
  if account.lapsed_changed then put(fields, FIELD.lapsed_reserves, table.concat(account.lapsed, ';')) end
  if account.blocks_now ~= stored.blocks then put(fields, FIELD.blocks, account.blocks_now) end
  local expiry = (day.newest + DR.slots) * DR.ms
  if #account.kept > 0 then expiry = max(expiry, now + RESERVE_TTL_MS) end
  if account.ban_until > 0 then expiry = max(expiry, account.ban_until + ESCALATION_MS) end
  if month.on and month.units > 0 then expiry = max(expiry, calendar.ends) end
  local grow = expiry > (stored.expiry or 0) + 0
  local expiry_text = grow and fmt('%d', expiry)
  if grow then put(fields, FIELD.expiry, expiry_text) end
  redis.call('HSET', account.key, unpack(fields))
  if day.moved then redis.call('HSET', day.key, day.moved[1], day.moved[2]) end
  if grow then
    redis.call('PEXPIREAT', account.key, expiry_text)
    redis.call('PEXPIREAT', day.key, expiry_text)
  elseif day.moved or day.written then
    redis.call('PEXPIREAT', day.key, stored.expiry) -- the hash's: a day hash this call made has none yet
  end
end

-- The call's reply (the header's Reply): Redis time, then each entry's 17 values, added in place.
local reply = { now }

-- A banned key's 17 reply values: banned, nothing counted, the ban's end.
local function reply_banned (ban_until)
  local at = #reply
  for position = at + 1, at + 15 do reply[position] = 0 end
  reply[at + 1], reply[at + 16], reply[at + 17] = 2, ban_until, 0
end

-- The entry's 17 reply values.
local function reply_of (account)
  local request, minute, day, month = account.request, account.minute, account.day, account.month
  local held, refused, cost = account.others + account.reserve, account.admitted < request.requests, request.cost
  local quota_out, at = account.quota_out, #reply
  reply[at + 1], reply[at + 2], reply[at + 3], reply[at + 4], reply[at + 5], reply[at + 6] =
    refused and 1 or 0, account.admitted, account.banned_at, account.granted, account.reserve, held
  reply[at + 7], reply[at + 8], reply[at + 9] =
    minute.units, reset_of(minute), refused and retry_of(minute, minute.units + held + cost - request.minute_limit) or 0
  reply[at + 10], reply[at + 11], reply[at + 12] =
    day.units, reset_of(day), refused and retry_of(day, day.units + held + cost - request.day_limit) or 0
  reply[at + 13], reply[at + 14], reply[at + 15] = month.units, calendar.ends, refused and quota_out and calendar.ends or 0
  reply[at + 16], reply[at + 17] = account.ban_until > now and account.ban_until or 0, account.elsewhere
end

-- One entry: answer a ban without counting; else read the account, apply what the caller sends, grant, write; its
-- reply values go into `reply`.
local function decide (index)
  local key, day_key, request = KEYS[2 * index - 1], KEYS[2 * index], parse_request(index)
  local stored = read_stored(key, request)
  local ban_until = (stored.ban_end or 0) + 0
  -- A ban answers new requests without counting them, and grants a banned key no block. What the entry settles is
  -- applied still (a give-back may pay for requests waiting since before the ban began; a write-back must count), and
  -- requests waiting since before it (waited) are decided by their windows.
  local banned = request.write and request.policy ~= '' and ban_until > now
  local answer_banned = banned and request.waited == 0
  if answer_banned and request.adjustments == '' then return reply_banned(ban_until) end
  if banned then request.extra = 0 end
  if answer_banned then request.requests = 0 end
  local account = {
    key = key, request = request, stored = stored, ban_until = ban_until,
    minute = load_minute(key, stored), day = load_day(day_key, stored), month = load_month(stored, request),
    written = 0, changed = false, lapsed = {}, lapsed_changed = false, kept = {}, reserves_changed = false,
    others = 0, holders = 0, mine = 0, blocks = {}, elsewhere = 0,
    admitted = 0, granted = 0, payable = 0, spared = 0, provisional = 0, banned_at = 0,
    keep = 0, room = 0, reserve = 0, blocks_now = false, quota_out = false -- set below (declared: no table growth)
  }
  apply_adjustments(account)
  take_back_lapsed(account)
  settle_reserves(account)
  compute_room(account)
  read_blocks(account)
  account.reserve = account.keep
  if request.write then
    grant(account)
    record_own_blocks(account)
  end
  account.blocks_now = request.write and table.concat(account.blocks, ';') or stored.blocks
  -- A month out of room (this call's admissions counted) refuses: quota_exceeded, no abuse either.
  account.quota_out = account.month.on and not request.soft and request.month_limit - account.month.units < request.cost
  if request.write and account.admitted < request.requests and request.policy ~= ''
    and not account.quota_out and not banned then
    count_rejections(account)
  end
  if request.write and (account.changed or account.reserves_changed or account.blocks_now ~= stored.blocks) then
    write_account(account)
  end
  if answer_banned then return reply_banned(ban_until) end
  reply_of(account)
end

for index = 1, floor(#KEYS / 2) do decide(index) end
return reply
