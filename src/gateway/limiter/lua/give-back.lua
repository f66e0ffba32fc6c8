-- give back: returns an ended lease's unused admissions to the buckets they were counted in (if
-- those buckets are still in their windows), so the shared window counts only what was admitted.
-- KEYS: 1 rl:{id}:m  2 rl:{id}:d
-- ARGV: 1 minute bucket index  2 day bucket index  3 unused count
-- Returns: 0
local n = tonumber(ARGV[3])
give_back(KEYS[1], M_SLOTS, tonumber(ARGV[1]), n)
give_back(KEYS[2], D_SLOTS, tonumber(ARGV[2]), n)
return 0
