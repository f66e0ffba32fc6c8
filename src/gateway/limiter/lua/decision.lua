-- The decision shared by decide.lua, decide-batch.lua and lease.lua, put before each at load time
-- (stores/redis-scripts.ts): decision(m_key, d_key, b_key, m_limit, d_limit, policy, block) decides
-- for one consumer's keys at `now` (the caller sets it from TIME first, before each decision) —
-- policy is the ban policy ('' : never banned), block
-- nil or a function giving the admissions to count from the minute ring and the room left. A
-- banned consumer is answered without counting; else both windows are read and, if both have
-- room, admissions are counted (1 without block) — else the 429 is counted under the ban policy.
-- Returns: a decision (window.lua).
local function decision (m_key, d_key, b_key, m_limit, d_limit, policy, block)
  local mf = redis.call('HMGET', m_key, 't', 'n', 'o', math.floor(now / M_BUCKET) % M_SLOTS, 'b')
  local ban_ends = tonumber(mf[5] or '0') or 0
  if policy ~= '' and ban_ends > now then return { 2, now, 0, 0, 0, 0, 0, 0, ban_ends, 0 } end
  local m = open(m_key, M_BUCKET, M_SLOTS, mf)
  local d = open(d_key, D_BUCKET, D_SLOTS, redis.call('HMGET', d_key, 't', 'n', 'o', math.floor(now / D_BUCKET) % D_SLOTS))
  local mc, mr, mt = read(m, m_limit)
  local dc, dr, dt = read(d, d_limit)
  if mc < m_limit and dc < d_limit then
    local grant = 1
    if block ~= nil then grant = block(m, math.min(m_limit - mc, d_limit - dc)) end
    save(m, grant, ban_ends)
    save(d, grant, 0)
    if mc == 0 then mr = (m.bucket + m.slots) * m.b end
    if dc == 0 then dr = (d.bucket + d.slots) * d.b end
    return { 0, now, mc + grant, mr, mt, dc + grant, dr, dt, 0, grant }
  end
  save(m, 0, ban_ends)
  save(d, 0, 0)
  if policy == '' then return { 1, now, mc, mr, mt, dc, dr, dt, 0, 0 } end
  -- The 429 counted under the ban policy 'threshold,windowMs,durationMs,maxMs': the latest
  -- threshold + 1 429s in a ring of fields 'r0'..: 'i' the next slot, 'c' how many were written
  -- since the last ban (capped). Banned when the oldest of them is within the window.
  local threshold, ban_window, base_ms, max_ms = string.match(policy, '^(%d+),(%d+),(%d+),(%d+)$')
  threshold, ban_window, base_ms, max_ms = tonumber(threshold), tonumber(ban_window), tonumber(base_ms), tonumber(max_ms)
  local size = threshold + 1
  local b = redis.call('HMGET', b_key, 'i', 'c', 'u', 'l')
  local i, c = tonumber(b[1] or '0'), tonumber(b[2] or '0')
  local next_i = (i + 1) % size
  c = math.min(c + 1, size)
  local oldest = now
  if c == size and size > 1 then oldest = tonumber(redis.call('HGET', b_key, 'r' .. next_i) or '0') end
  if c == size and now - oldest < ban_window then
    local level = 0
    local previous = tonumber(b[3] or '0')
    if now - previous < ESCALATION_MS then level = tonumber(b[4] or '-1') + 1 end
    local duration = max_ms
    if level < 40 then duration = math.min(base_ms * 2 ^ level, max_ms) end
    local until_ms = now + duration
    redis.call('HSET', b_key, 'u', until_ms, 'l', level, 'c', 0, 'i', 0)
    redis.call('PEXPIRE', b_key, duration + ESCALATION_MS)
    redis.call('HSET', m_key, 'b', until_ms)
    if redis.call('PTTL', m_key) < duration then redis.call('PEXPIRE', m_key, duration) end
    return { 3, now, mc, mr, mt, dc, dr, dt, until_ms, 0 }
  end
  redis.call('HSET', b_key, 'r' .. i, now, 'i', next_i, 'c', c)
  if redis.call('PTTL', b_key) < ban_window then redis.call('PEXPIRE', b_key, ban_window) end
  return { 1, now, mc, mr, mt, dc, dr, dt, 0, 0 }
end
