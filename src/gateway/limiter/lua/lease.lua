-- lease: decide, counting a block of admissions at once in the current buckets when there is room
-- (stores/leases.ts spends it locally until the minute bucket ends by this TIME; docs/limiter-internals.md
-- gives the exactness argument), after handing back what the lease it replaces did not spend.
-- The block is never more than asked for, nor more than a fair share of the room left: split among
-- the processes that leased this consumer in this bucket or the one before, one share kept back
-- for a process that has not asked yet. Near the limit blocks shrink to one.
-- KEYS: 1 rl:{id}:m  2 rl:{id}:d  3 rl:{id}:b (window.lua describes them)
-- ARGV: 1 per-minute limit  2 per-day limit  3 ban policy (as decide.lua)  4 block wanted (>= 1,
--       this request included)  5 holder id (one per process)
--       6 7 8 hand back first: the replaced lease's minute bucket, day bucket and unused count (8 = 0: none)
-- Returns: a decision (window.lua; decision.lua makes it), admissions granted the block (0 when not
-- admitted).
if ARGV[8] ~= '0' then
  local n = tonumber(ARGV[8])
  give_back(KEYS[1], M_SLOTS, tonumber(ARGV[6]), n)
  give_back(KEYS[2], D_SLOTS, tonumber(ARGV[7]), n)
end

local want, me = tonumber(ARGV[4]), ARGV[5]
local function fair_share (m, room)
  local h = redis.call('HMGET', m.key, 'hb', 'hc', 'hp')
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
  redis.call('HSET', m.key, 'hb', m.bucket, 'hc', current, 'hp', previous)
  return math.max(1, math.min(want, math.floor(room / (others + 2))))
end

local t = redis.call('TIME')
now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return decision(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], fair_share)
