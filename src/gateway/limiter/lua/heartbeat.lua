-- heartbeat: this gateway process is alive; how many are. The `local` fallback gives each process
-- its share of a consumer's room by this count (stores/process-registry.ts): counting a process
-- that has stopped only makes the shares smaller.
-- KEYS: 1 petstore:gateways (sorted set: holder id -> Redis ms of its last heartbeat)
-- ARGV: 1 holder id  2 horizon ms (a process not heard from for this long is no longer counted)
--       3 1: this process leaves (removed, not counted)
-- Returns: processes counted
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local horizon = tonumber(ARGV[2])
if ARGV[3] == '1' then redis.call('ZREM', KEYS[1], ARGV[1]) else redis.call('ZADD', KEYS[1], now, ARGV[1]) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - horizon)
redis.call('PEXPIRE', KEYS[1], horizon)
return redis.call('ZCARD', KEYS[1])
