-- peek: what decide would answer now, writing nothing (no count, no 429 recorded); a banned
-- consumer's windows are read too (the admin API's usage view).
-- KEYS: 1 rl:{id}:m  2 rl:{id}:d
-- ARGV: 1 per-minute limit  2 per-day limit
-- Returns: a decision (window.lua), admissions granted always 0.
local m_limit, d_limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local mf = redis.call('HMGET', KEYS[1], 't', 'n', 'o', math.floor(now / M_BUCKET) % M_SLOTS, 'b')
local ban_ends = tonumber(mf[5] or '0') or 0
local m = open(KEYS[1], M_BUCKET, M_SLOTS, mf)
local d = open(KEYS[2], D_BUCKET, D_SLOTS, redis.call('HMGET', KEYS[2], 't', 'n', 'o', math.floor(now / D_BUCKET) % D_SLOTS))
local mc, mr, mt = read(m, m_limit)
local dc, dr, dt = read(d, d_limit)
if ban_ends > now then return { 2, now, mc, mr, mt, dc, dr, dt, ban_ends, 0 } end
if mc < m_limit and dc < d_limit then return { 0, now, mc, mr, mt, dc, dr, dt, 0, 0 } end
return { 1, now, mc, mr, mt, dc, dr, dt, 0, 0 }
