-- grant: count before admit. Per entry (one id's requests waiting in one process), atomically at one Redis TIME: answer
-- a ban without counting; else apply the adjustments, count in every window (minute, day, month) the units of the
-- requests that fit, each whole or not at all, plus `extra` the process spends until the minute bucket ends (a block),
-- and set its reserve (kept back from everyone else, spent only while Redis does not answer). A request that does not
-- fit is a 429, counted under the ban policy unless the month refused it or it is provisional (it waits for blocks held
-- elsewhere: counted only once final, and a ban that starts meanwhile does not answer it); one refused while reserves
-- kept back room that could pay for it is counted once that room is spent. Layout and proof: docs/limiter-internals.md.
-- KEYS[2i-1]  rl:{id}    t, n, o minute ring (newest bucket, units in window, oldest bucket with units), '0'..'60' its
--                        buckets; D, N, O, c the day ring's (c: bucket D's units); Q, q month, units; b, e, l ban end,
--                        last ban's end, level; k recent 429s 'ms:n,…' per bucket of the ban window, at its start
--                        ('ms:ns': spared for reserves, pending); r reserves 'holder,units,untilMs;…'; p blocks held
--                        'holder,minuteBucket,units;…' (granted in the last BLOCK_HELD_BUCKETS minute buckets, not
--                        given back yet); x expiry (Unix ms); L lapsed reserves charged to the day and month
--                        'holder,units,dayBucket,month;…' (taken back when their holder calls again: its write-backs
--                        count what it spent)
-- KEYS[2i]    rl:{id}:d  the day ring's buckets before D, '0'..'96'
--                        Both keys expire at x: a call that writes either one sets its expiry in that call
--                        (the entry's write), so neither outlives the windows of a consumer that never comes back.
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
-- prints it with %.17g) — so field names are made once per call and values written as %d text; and every table
-- made, field looked up and closure made counts (an entry's state is locals of the entry loop, not a function's: a
-- closure over ~50 upvalues cost ~2.5 µs a call to make, and each upvalue read more than a local: bench/grant-lua51.ts).
-- The fields of rl:{id}, as src/gateway/limiter/redis/layout.ts names them (a test checks they are the same). Locals,
-- not a table: Redis runs the whole script on every call, so a table here would be built again each time.
local FIELD_MINUTE_NEWEST, FIELD_MINUTE_UNITS, FIELD_MINUTE_OLDEST = 't', 'n', 'o'
local FIELD_DAY_NEWEST, FIELD_DAY_UNITS, FIELD_DAY_OLDEST, FIELD_DAY_NEWEST_UNITS = 'D', 'N', 'O', 'c'
local FIELD_MONTH, FIELD_MONTH_UNITS = 'Q', 'q'
local FIELD_BAN_END, FIELD_LAST_BAN_END, FIELD_BAN_LEVEL, FIELD_RECENT_REJECTIONS = 'b', 'e', 'l', 'k'
local FIELD_RESERVES, FIELD_BLOCKS, FIELD_EXPIRY, FIELD_LAPSED_RESERVES = 'r', 'p', 'x', 'L'
local MR = { ms = 1000.0, slots = 61, mod = 2 ^ 20, scale = 2 ^ 32, names = {} }
local DR = { ms = 900000.0, slots = 97, mod = 2 ^ 13, scale = 2 ^ 40, names = {} }
local ESCALATION_MS, RESERVE_TTL_MS = 86400000, 120000
local BLOCK_HELD_BUCKETS = 3
-- A reserve grows only while the room left would last RESERVE_SLACK_SECONDS at the key's pace: the units every process
-- counted in its last RESERVE_PACE_BUCKETS minute buckets.
local RESERVE_SLACK_SECONDS, RESERVE_PACE_BUCKETS = 10, 3
-- Recent 429s are kept per bucket of the ban window, at the bucket's start (src/gateway/limiter/ban-record.ts, which a
-- test checks against this): at most two events a bucket however hard a key is flooded, and a 429 counts toward the
-- ban for at least the window less one bucket and at most the window.
local BAN_BUCKETS = 60
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
  local number = value + 0 -- the text turned into a number once (each arithmetic on the text would do it again)
  local stored = number % shape.scale
  return (number - stored) / shape.scale == bucket % shape.mod and stored or 0
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

-- A ring as one entry sees it is five locals of the entry loop: its newest bucket, that bucket's units
-- (newest_units), the units in the window, the oldest bucket with units, and the newest bucket the hash held
-- (stored_newest). The helpers below take the ring's key and shape (MR or DR) and those values, and return what they
-- change.

-- Adds delta to bucket `bucket` of a ring: into the newest (a bucket ahead of Redis's clock is counted now: later, so
-- safe), or read, changed and written back; a bucket out of the window is skipped. `known`: the bucket's field as the
-- entry already read it (false: missing; nil: not read). Returns the ring's units, newest_units and oldest, and
-- whether it wrote the bucket's field (its key then needs its expiry).
local function adjust (key, shape, bucket, delta, known, newest, newest_units, total, oldest)
  if bucket >= newest then
    local value = max(0, newest_units + delta)
    return total + value - newest_units, value, oldest, false
  end
  if bucket <= newest - shape.slots or bucket <= 0 then return total, newest_units, oldest, false end
  local stored
  if known ~= nil then stored = units(known, bucket, shape) else stored = read(key, bucket, bucket, shape)[bucket] end
  local value = max(0, stored + delta)
  redis.call('HSET', key, slot_name(bucket, shape), fmt('%d', (bucket % shape.mod) * shape.scale + value))
  return total + value - stored, newest_units, min(oldest or bucket, bucket), true
end

-- The ring moved on to `bucket` from its newest `last`: what left the window leaves its units and oldest bucket
-- (returned). `at_bucket`: the value of bucket `bucket`'s field as the entry read it (false: missing; nil: not read)
-- — the field of bucket `bucket - slots` too, so the common slide of one bucket needs no read of its own.
local function slide (key, shape, bucket, last, at_bucket, total, oldest)
  if not oldest or oldest > bucket - shape.slots then return total, oldest end
  if last <= bucket - shape.slots then return 0, nil end
  if oldest == bucket - shape.slots and at_bucket ~= nil then total = total - units(at_bucket, oldest, shape)
  else
    for _, stored in pairs(read(key, oldest, bucket - shape.slots, shape)) do total = total - stored end
  end
  return total, bucket - shape.slots + 1
end

-- When enough of the ring's units have left the window for `need` (retry; its reset is the entry's reply).
local function retry_of (key, shape, oldest, newest, newest_units, need)
  if need <= 0 then return 0 end
  local first = oldest or newest
  local freed, buckets = 0, read(key, first, newest - 1, shape)
  for bucket = first, newest do
    freed = freed + (bucket == newest and newest_units or buckets[bucket])
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

-- The rejected requests count as 429s: banned once more than `threshold` fall in the window, each ban within
-- ESCALATION_MS of the last one's end a level longer. The provisional ones (they wait for blocks held elsewhere) come
-- first and are not counted. A refusal spared otherwise (answered 429 now while reserves kept back room that could
-- have paid for it) is recorded pending ('ms:ns'): excused while the window could still pay for it — the room left,
-- the reserves kept back and the blocks held elsewhere, older pending ones first — and counted from the first call
-- with a refusal that finds that spent (the holder spent its reserve, or handed it back and it was admitted).
-- Each 429 is kept at the start of its bucket of the window (BAN_BUCKETS), merged with that bucket's event of its kind.
-- Returns the rejected request that started a ban (0: none), the ban's end (nil: no new ban), and whether the hash
-- must be written (a ban, or a new hash's first rejections: the entry's write sets its expiry).
local function count_rejections (key, policy, refused, provisional, payable, stored_expiry)
  local threshold, window, base_ms, max_ms = string.match(policy, '^(%d+),(%d+),(%d+),(%d+)$')
  threshold, window, base_ms, max_ms = threshold + 0, window + 0, base_ms + 0, max_ms + 0
  local bucket_ms = math.ceil(window / BAN_BUCKETS)
  local bucket_at = fmt('%.0f', floor(now / bucket_ms) * bucket_ms)
  local stored = redis.call('HMGET', key, FIELD_RECENT_REJECTIONS, FIELD_LAST_BAN_END, FIELD_BAN_LEVEL)
  local last_end, level = (stored[2] or 0) + 0, (stored[3] or -1) + 0
  local excusable = max(0, payable - provisional) -- what the window could still pay for, past the provisional
  local recent, pending, events = 0, 0, {}
  for at, count, spared in string.gmatch(stored[1] or '', '(%d+):(%d+)(s?)') do
    if at + 0 > now - window then
      events[#events + 1] = { at = at, count = count + 0, kind = spared }
      if spared == 's' then pending = pending + count else recent = recent + count end
    end
  end
  local converted = max(0, pending - excusable)
  local spared_now = min(refused - provisional, excusable - (pending - converted))
  local spared = provisional + spared_now
  local rejected = refused - spared
  -- What is written back: one event per bucket start and kind ('' counted, 's' pending), in the order first met.
  local written, event_of = {}, {}
  local function add (at, count, kind)
    local event = event_of[at .. kind]
    if event then event.count = event.count + count; return end
    event = { at = at, count = count, kind = kind }
    event_of[at .. kind], written[#written + 1] = event, event
  end
  for _, event in ipairs(events) do
    local count = event.count
    if event.kind == 's' and converted > 0 then
      local counted = min(converted, count)
      converted, count, recent = converted - counted, count - counted, recent + counted
      add(event.at, counted, '')
    end
    if count > 0 then add(event.at, count, event.kind) end
  end
  if rejected > 0 and recent + rejected > threshold then
    local banned_at = spared + max(1, threshold - recent + 1)
    level = now - last_end < ESCALATION_MS and level + 1 or 0
    local ban_until = now + (level < 40 and min(base_ms * 2 ^ level, max_ms) or max_ms)
    redis.call('HSET', key, FIELD_BAN_END, fmt('%.0f', ban_until), FIELD_LAST_BAN_END,
      fmt('%.0f', ban_until), FIELD_BAN_LEVEL, level, FIELD_RECENT_REJECTIONS, '')
    return banned_at, ban_until, true
  end
  if rejected > 0 then add(bucket_at, rejected, '') end
  if spared_now > 0 then add(bucket_at, spared_now, 's') end
  local parts = {}
  for slot, event in ipairs(written) do parts[slot] = fmt('%s:%d%s', event.at, event.count, event.kind) end
  local value = table.concat(parts, ',')
  if value ~= (stored[1] or '') then
    redis.call('HSET', key, FIELD_RECENT_REJECTIONS, value)
    return 0, nil, not stored_expiry -- a new hash: the entry's write sets its expiry
  end
  return 0, nil, false
end

-- Per call: the calendar month and when it ends (found once, by the first entry with a month quota); the blocks
-- granted to the caller per key by this call's entries so far (a later entry of the same key — another cost, or
-- requests waiting since another bucket — says what the caller held before the call, and must keep them); the
-- fields an entry reads (HMGET) and writes (HSET), one list each reused by every entry (unpack(list, 1, count));
-- the reply (the header's Reply): Redis time, then each entry's 17 values, added in place.
local calendar_month, calendar_ends = -1, 0
local granted_in_call = {}
local minute_slot, minute_tag = slot_name(minute_bucket, MR), (minute_bucket % MR.mod) * MR.scale
local stored_names = { FIELD_MINUTE_NEWEST, FIELD_MINUTE_UNITS, FIELD_MINUTE_OLDEST, minute_slot,
  FIELD_DAY_NEWEST, FIELD_DAY_UNITS, FIELD_DAY_OLDEST, FIELD_DAY_NEWEST_UNITS, FIELD_BAN_END, FIELD_RESERVES,
  FIELD_EXPIRY, FIELD_BLOCKS, FIELD_LAPSED_RESERVES, FIELD_MONTH, FIELD_MONTH_UNITS }
local fields = {}
local minute_empty_reset, day_empty_reset = now + (MR.slots - 1) * MR.ms, now + (DR.slots - 1) * DR.ms
local reply = { now }

-- A banned key's 17 reply values: banned, nothing counted, the ban's end.
local function reply_banned (ban_until)
  local at = #reply
  for position = at + 1, at + 15 do reply[position] = 0 end
  reply[at + 1], reply[at + 16], reply[at + 17] = 2, ban_until, 0
end

-- One entry (ARGV[3i-1..3i+1]): answer a ban without counting; else read the account, apply what the caller sends
-- (adjustments; its lapsed reserves taken back; others' reserves settled), find the room, grant, count the refusals,
-- write what changed; its 17 reply values go into `reply`. The entry's state is locals (the cost of a table per
-- record and a lookup per use is most of a script this size: bench/results/grantcost.md).
for index = 1, floor(#KEYS / 2) do repeat -- one entry; `break` ends it (Lua 5.1 has no goto or continue)
  local key, day_key, argv = KEYS[2 * index - 1], KEYS[2 * index], 3 * index - 1
  local minute_limit, day_limit, month_limit, requests, cost, extra, want, write, soft, own_bucket, own_blocks, waited =
    string.match(ARGV[argv], '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d) (%d) (%-?%d+) (%d+) (%d+)$')
  minute_limit, day_limit, month_limit, requests = minute_limit + 0, day_limit + 0, month_limit + 0, requests + 0
  cost, extra, want, write, soft = cost + 0, extra + 0, want + 0, write == '1', soft == '1'
  own_bucket, own_blocks, waited = floor(own_bucket), own_blocks + 0, floor(waited)
  local policy, adjustments = ARGV[argv + 1], ARGV[argv + 2]

  -- The fields of rl:{id} the entry reads, in one HMGET (false: missing): the month's too when it has a month quota,
  -- and the minute bucket of its first adjustment (a give-back's: usually the last second's), which adjust would read.
  local month_on = month_limit > 0
  local count = month_on and 15 or 13
  local adjusted = adjustments ~= '' and string.match(adjustments, '^(%d+),')
  if adjusted then adjusted = floor(adjusted); count = count + 1; stored_names[count] = slot_name(adjusted, MR) end
  if month_on then stored_names[14], stored_names[15] = FIELD_MONTH, FIELD_MONTH_UNITS end
  local values = redis.call('HMGET', key, unpack(stored_names, 1, count))
  local adjusted_value = adjusted and values[count]
  -- The stored counts and positions the rings start from and the write compares with, each field's text turned into a
  -- number once: in Redis's Lua every arithmetic on a text is a strtod of its own (false: missing).
  local stored_minute_units, stored_minute_oldest = values[2] and values[2] + 0, values[3] and values[3] + 0
  local stored_day_units, stored_day_oldest = values[6] and values[6] + 0, values[7] and values[7] + 0
  local stored_day_newest_units = values[8] and values[8] + 0
  local ban_until = (values[9] or 0) + 0
  -- A ban answers new requests without counting them, and grants a banned key no block. What the entry settles is
  -- applied still (a give-back may pay for requests waiting since before the ban began; a write-back must count), and
  -- requests waiting since before it (waited) are decided by their windows.
  local banned = write and policy ~= '' and ban_until > now
  local answer_banned = banned and waited == 0
  if answer_banned and adjustments == '' then reply_banned(ban_until); break end
  if banned then extra = 0 end
  if answer_banned then requests = 0 end

  -- The minute ring at this call's bucket (a clock behind the newest bucket counts into it: later, safe).
  local minute_newest, minute_newest_units, minute_units, minute_oldest, minute_stored_newest =
    minute_bucket, 0, 0, nil, minute_bucket
  if values[1] then
    minute_stored_newest, minute_units = floor(values[1]), stored_minute_units
    minute_oldest = stored_minute_oldest and floor(stored_minute_oldest)
    if minute_bucket == minute_stored_newest then minute_newest_units = units(values[4], minute_bucket, MR)
    elseif minute_bucket < minute_stored_newest then
      minute_newest = minute_stored_newest
      minute_newest_units = units(redis.call('HGET', key, slot_name(minute_newest, MR)), minute_newest, MR)
    else
      minute_units, minute_oldest = slide(key, MR, minute_bucket, minute_stored_newest, values[4], minute_units, minute_oldest)
    end
  end
  -- The day ring at this call's bucket: the newest bucket's units move from their field into the day hash as it
  -- ends (day_moved_name, day_moved_value: the field and value to write; day_moved_bucket: that bucket).
  local day_newest, day_newest_units, day_units, day_oldest, day_stored_newest = day_bucket, 0, 0, nil, day_bucket
  local day_moved_name, day_moved_value, day_moved_bucket, day_written = nil, nil, nil, false
  if values[5] then
    local last = floor(values[5])
    day_stored_newest, day_units, day_oldest = last, stored_day_units, stored_day_oldest and floor(stored_day_oldest)
    if day_bucket <= last then day_newest, day_newest_units = last, stored_day_newest_units or 0
    else
      if (stored_day_newest_units or 0) > 0 and last > day_bucket - DR.slots then
        day_moved_name, day_moved_value, day_moved_bucket =
          slot_name(last, DR), fmt('%d', (last % DR.mod) * DR.scale + stored_day_newest_units), last
      end
      -- bucket `last` is in its field, never read: last > day_bucket - DR.slots here
      day_units, day_oldest = slide(day_key, DR, day_bucket, last, nil, day_units, day_oldest)
    end
  end
  -- The month's units (read with the entry's other fields).
  local month_units = 0
  if month_on then
    if calendar_month < 0 then calendar_month, calendar_ends = month_of(now) end
    if values[14] and floor(values[14]) == calendar_month then month_units = values[15] + 0 end
  end

  -- written: what the adjustments write back from the caller's reserve; kept, lapsed, blocks: the items of the
  -- fields r, L, p to write (nil: none).
  local written, changed, reserves_changed, lapsed_changed = 0, false, false, false
  local kept, lapsed, blocks = nil, nil, nil
  -- Adjustments (rare). What they add was admitted from the caller's reserve (or is a re-seed, when it has none): its
  -- reserve shrinks by as much; the outage allowance's ('a') does not. A read changes nothing.
  if adjustments ~= '' and write then
    local first = true
    for adjust_minute, adjust_day, adjust_month, delta, kind in string.gmatch(adjustments, '(%d+),(%d+),(%d+),(-?%d+)(a?)') do
      adjust_minute, adjust_day, adjust_month, delta = floor(adjust_minute), floor(adjust_day), floor(adjust_month), delta + 0
      if delta > 0 and kind == '' then written = written + delta end
      -- The first adjustment's minute bucket was read with the entry's fields, and nothing has written it since.
      local known = nil
      if first and adjust_minute == adjusted then known = adjusted_value end
      first = false
      minute_units, minute_newest_units, minute_oldest = adjust(key, MR, adjust_minute, delta, known, minute_newest,
        minute_newest_units, minute_units, minute_oldest)
      -- The day bucket moving into the day hash in this call: its units are in day_moved_value, not in the hash yet
      -- (written here, adjusted, instead of after the entry, which would overwrite this write with the units before it).
      known = nil
      if day_moved_name and adjust_day == day_moved_bucket then known, day_moved_name = day_moved_value, nil end
      local wrote
      day_units, day_newest_units, day_oldest, wrote = adjust(day_key, DR, adjust_day, delta, known, day_newest,
        day_newest_units, day_units, day_oldest)
      day_written = day_written or wrote
      if month_on and adjust_month > 0 and adjust_month >= calendar_month then
        month_units = max(0, month_units + delta)
      end
      changed = true
    end
  end
  -- Lapsed reserves: the caller's charge is taken back (what it spent comes in its write-backs); others' stay charged
  -- while their day bucket is in the window (a crashed holder's may be spent).
  local lapsed_text = values[13] or ''
  if lapsed_text ~= '' then
    for item, holder, reserved, lapsed_day, lapsed_month in string.gmatch(lapsed_text, '(([^,;]+),(%d+),(%d+),(%d+))') do
      reserved, lapsed_day, lapsed_month = reserved + 0, floor(lapsed_day), floor(lapsed_month)
      if holder == CALLER and write then
        local known, wrote = nil, false
        if day_moved_name and lapsed_day == day_moved_bucket then known, day_moved_name = day_moved_value, nil end
        day_units, day_newest_units, day_oldest, wrote = adjust(day_key, DR, lapsed_day, -reserved, known, day_newest,
          day_newest_units, day_units, day_oldest)
        day_written = day_written or wrote
        if month_on and lapsed_month == calendar_month then month_units = max(0, month_units - reserved) end
        lapsed_changed, changed = true, true
      elseif lapsed_day > day_newest - DR.slots then
        lapsed = lapsed or {}
        lapsed[#lapsed + 1] = item -- as written: 'holder,units,dayBucket,month' with %d
      else lapsed_changed = true end
    end
  end
  -- Reserves: others' are kept back; another holder's that expired is charged to the day and the month (it may have
  -- spent it before the minute window let go of it) and noted as lapsed, then dropped. The caller's own that expired
  -- is dropped uncharged: this call's write-backs count what it spent.
  local others, holders, mine = 0, 0, 0
  local reserves_text = values[10]
  if reserves_text and reserves_text ~= '' then
    for item, holder, reserved, until_ms in string.gmatch(reserves_text, '(([^,;]+),(%d+),(%d+))') do
      reserved, until_ms = reserved + 0, until_ms + 0
      if until_ms <= now and holder == CALLER and write then reserves_changed = true
      elseif until_ms <= now then
        day_units, day_newest_units, day_oldest, changed = day_units + reserved, day_newest_units + reserved,
          day_oldest or day_newest, true
        if month_on then month_units = month_units + reserved end
        lapsed = lapsed or {}
        lapsed[#lapsed + 1] = fmt('%s,%d,%d,%d', holder, reserved, day_newest, month_on and calendar_month or 0)
        lapsed_changed = true
      elseif holder == CALLER and write then mine, reserves_changed = reserved, true
      else
        kept = kept or {}
        kept[#kept + 1] = item -- as written: 'holder,units,untilMs' with %d
        others = others + reserved
        if holder ~= CALLER then holders = holders + 1 end
      end
    end
  end
  -- The room left for this call: the windows' less what others keep back and the caller keeps of its reserve.
  local keep = max(0, min(mine - written, want))
  local room = min(minute_limit - minute_units, day_limit - day_units) - others - keep
  if month_on and not soft then room = min(room, month_limit - month_units - others - keep) end
  -- Blocks held: granted in the last BLOCK_HELD_BUCKETS minute buckets and not given back yet (a holder's give-back at
  -- its bucket's end, late on a loaded process, may reach Redis after the next buckets' calls: its units are counted
  -- until then). The caller says what it holds itself (0 once given back); others' entries stay until their bucket is
  -- BLOCK_HELD_BUCKETS seconds old. held_elsewhere: those of other holders.
  local blocks_text, held_elsewhere = values[12] or '', 0
  if blocks_text ~= '' then
    for item, holder, held_bucket, held in string.gmatch(blocks_text, '(([^,;]+),(%-?%d+),(%d+))') do
      held_bucket, held = floor(held_bucket), held + 0
      if held_bucket > minute_bucket - BLOCK_HELD_BUCKETS and not (write and holder == CALLER) then
        blocks = blocks or {}
        blocks[#blocks + 1] = item -- as written: 'holder,minuteBucket,units' with %d
        if holder ~= CALLER then held_elsewhere = held_elsewhere + held end
      end
    end
  end

  local admitted, granted, reserve, banned_at = 0, 0, keep, 0
  local blocks_now = blocks_text
  if write then
    -- Admits the requests that fit, grants the block and sizes the caller's reserve, and counts what is added.
    local share = holders + 2
    if cost <= room then admitted = min(requests, floor(room / cost)) end
    room = room - admitted * cost
    granted = max(0, min(extra, floor(room / share)))
    room = room - granted
    -- A reserve grows only while the room left would last RESERVE_SLACK_SECONDS at the key's pace (every process's
    -- units in its last RESERVE_PACE_BUCKETS minute buckets, this call's counted): a key racing its limit holds none.
    -- The caller sized its want by its own rate and its last view of the room, blind to what other processes took
    -- since and to their pace: a burst of theirs (or one queued behind a stalled loop, sent at once) refused while a
    -- reserve is kept back starts a ban, and the reserve goes to nobody (docs/limiter-internals.md).
    if want > keep then
      local pace = minute_newest_units + admitted * cost + granted
      for _, stored in pairs(read(key, minute_newest - RESERVE_PACE_BUCKETS + 1, minute_newest - 1, MR)) do
        pace = pace + stored
      end
      if room * RESERVE_PACE_BUCKETS >= pace * RESERVE_SLACK_SECONDS then
        reserve = keep + max(0, min(want - keep, floor(room / share)))
      end
    end
    local add = admitted * cost + granted
    if add > 0 then
      minute_newest_units, minute_units, minute_oldest = minute_newest_units + add, minute_units + add,
        minute_oldest or minute_newest
      day_newest_units, day_units, day_oldest = day_newest_units + add, day_units + add, day_oldest or day_newest
      month_units, changed = month_units + add, true
    end
    if reserve > 0 then
      kept = kept or {}
      kept[#kept + 1] = fmt('%s,%d,%d', CALLER, reserve, now + RESERVE_TTL_MS)
    end
    reserves_changed = reserves_changed or reserve ~= mine
    -- The caller's blocks: those it says it still holds (in a bucket not yet BLOCK_HELD_BUCKETS seconds old), and
    -- this call's (granted_in_call: its earlier entries' of the same key too).
    local granted_here = granted + (granted_in_call[key] or 0)
    granted_in_call[key] = granted_here
    if own_bucket <= minute_bucket - BLOCK_HELD_BUCKETS then own_blocks = 0 end
    if granted_here > 0 and own_bucket ~= minute_bucket then
      if own_blocks > 0 then
        blocks = blocks or {}
        blocks[#blocks + 1] = fmt('%s,%d,%d', CALLER, own_bucket, own_blocks)
      end
      own_bucket, own_blocks = minute_bucket, 0
    end
    own_blocks = own_blocks + granted_here
    if own_blocks > 0 then
      blocks = blocks or {}
      blocks[#blocks + 1] = fmt('%s,%d,%d', CALLER, own_bucket, own_blocks)
    end
    blocks_now = blocks and (blocks[2] and table.concat(blocks, ';') or blocks[1]) or ''
  end
  -- A month out of room (this call's admissions counted) refuses: quota_exceeded, no abuse either.
  local quota_out = month_on and not soft and month_limit - month_units < cost
  if write and admitted < requests and policy ~= '' and not quota_out and not banned then
    -- Requests refused only because units are kept back or pooled elsewhere (the window is not full) are no abuse:
    -- those blocks held elsewhere could pay for are provisional while the blocks they first saw can still be held.
    -- Found here, from the room left after this call's admissions and block (room is not changed after them), so an
    -- entry that refuses nothing (the healthy path) pays nothing for them.
    local elsewhere = (waited == 0 or minute_bucket < waited + BLOCK_HELD_BUCKETS) and held_elsewhere or 0
    local payable = floor(max(0, room + others + keep + elsewhere) / cost)
    local provisional = min(requests - admitted, floor(elsewhere / cost))
    local new_ban, must_write
    banned_at, new_ban, must_write = count_rejections(key, policy, requests - admitted, provisional, payable, values[11])
    if new_ban then ban_until = new_ban end
    changed = changed or must_write
  end

  -- Writes what changed (a count the hash holds already is not written again). Kept until every window lets go of
  -- what it holds: the day ring's newest bucket, a reserve's end, a ban's escalation memory (its end +
  -- ESCALATION_MS), the month's end. The day hash expires with it, also when the expiry does not grow and this call
  -- made the day hash.
  if write and (changed or reserves_changed or blocks_now ~= blocks_text) then
    if minute_newest == minute_bucket then fields[1], fields[2] = minute_slot, fmt('%d', minute_tag + minute_newest_units)
    else
      fields[1], fields[2] = slot_name(minute_newest, MR), fmt('%d', (minute_newest % MR.mod) * MR.scale + minute_newest_units)
    end
    count = 2
    if minute_units ~= (stored_minute_units or -1) then
      fields[count + 1], fields[count + 2], count = FIELD_MINUTE_UNITS, fmt('%d', minute_units), count + 2
    end
    if day_units ~= (stored_day_units or -1) then
      fields[count + 1], fields[count + 2], count = FIELD_DAY_UNITS, fmt('%d', day_units), count + 2
    end
    if day_newest_units ~= (stored_day_newest_units or -1) then
      fields[count + 1], fields[count + 2], count = FIELD_DAY_NEWEST_UNITS, fmt('%d', day_newest_units), count + 2
    end
    -- The rings' positions, when a ring moved on (or the hash is new); each only if its text is not the one stored.
    if values[1] == false or minute_newest ~= minute_stored_newest or day_newest ~= day_stored_newest then
      if values[1] == false or minute_newest ~= minute_stored_newest then
        fields[count + 1], fields[count + 2], count = FIELD_MINUTE_NEWEST, fmt('%d', minute_newest), count + 2
      end
      local oldest = minute_oldest or minute_newest
      if not stored_minute_oldest or oldest ~= stored_minute_oldest then
        fields[count + 1], fields[count + 2], count = FIELD_MINUTE_OLDEST, fmt('%d', oldest), count + 2
      end
      if not values[5] or day_newest ~= day_stored_newest then
        fields[count + 1], fields[count + 2], count = FIELD_DAY_NEWEST, fmt('%d', day_newest), count + 2
      end
      oldest = day_oldest or day_newest
      if not stored_day_oldest or oldest ~= stored_day_oldest then
        fields[count + 1], fields[count + 2], count = FIELD_DAY_OLDEST, fmt('%d', oldest), count + 2
      end
    end
    if month_on then
      fields[count + 1], fields[count + 2] = FIELD_MONTH, fmt('%d', calendar_month)
      fields[count + 3], fields[count + 4], count = FIELD_MONTH_UNITS, fmt('%d', month_units), count + 4
    end
    if reserves_changed then
      fields[count + 1], fields[count + 2], count = FIELD_RESERVES, kept and table.concat(kept, ';') or '', count + 2
    end
    if lapsed_changed then
      fields[count + 1], fields[count + 2], count = FIELD_LAPSED_RESERVES, lapsed and table.concat(lapsed, ';') or '',
        count + 2
    end
    if blocks_now ~= blocks_text then fields[count + 1], fields[count + 2], count = FIELD_BLOCKS, blocks_now, count + 2 end
    local expiry = (day_newest + DR.slots) * DR.ms
    if kept then expiry = max(expiry, now + RESERVE_TTL_MS) end
    if ban_until > 0 then expiry = max(expiry, ban_until + ESCALATION_MS) end
    if month_on and month_units > 0 then expiry = max(expiry, calendar_ends) end
    local grow = expiry > (values[11] or 0) + 0
    local expiry_text = grow and fmt('%d', expiry)
    if grow then fields[count + 1], fields[count + 2], count = FIELD_EXPIRY, expiry_text, count + 2 end
    redis.call('HSET', key, unpack(fields, 1, count))
    if day_moved_name then redis.call('HSET', day_key, day_moved_name, day_moved_value) end
    if grow then
      redis.call('PEXPIREAT', key, expiry_text)
      redis.call('PEXPIREAT', day_key, expiry_text)
    elseif day_moved_name or day_written then
      redis.call('PEXPIREAT', day_key, values[11]) -- the hash's: a day hash this call made has none yet
    end
  end
  if answer_banned then reply_banned(ban_until); break end

  -- The entry's 17 reply values.
  local held, refused, at = others + reserve, admitted < requests, #reply
  reply[at + 1], reply[at + 2], reply[at + 3], reply[at + 4], reply[at + 5], reply[at + 6] =
    refused and 1 or 0, admitted, banned_at, granted, reserve, held
  -- reset: when the ring's oldest units leave the window (a ring without units: a full window from now)
  reply[at + 7], reply[at + 8], reply[at + 9] = minute_units,
    minute_units > 0 and minute_oldest and (minute_oldest + MR.slots) * MR.ms or minute_empty_reset,
    refused and retry_of(key, MR, minute_oldest, minute_newest, minute_newest_units, minute_units + held + cost - minute_limit) or 0
  reply[at + 10], reply[at + 11], reply[at + 12] = day_units,
    day_units > 0 and day_oldest and (day_oldest + DR.slots) * DR.ms or day_empty_reset,
    refused and retry_of(day_key, DR, day_oldest, day_newest, day_newest_units, day_units + held + cost - day_limit) or 0
  reply[at + 13], reply[at + 14], reply[at + 15] = month_units, calendar_ends, refused and quota_out and calendar_ends or 0
  reply[at + 16], reply[at + 17] = ban_until > now and ban_until or 0, held_elsewhere
until true end

return reply
