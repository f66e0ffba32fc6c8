-- epoch: the marker of one master's data set. Its value is made once, by the first process that
-- finds it missing, and stays as long as the data does (a restart from a snapshot or an append-only
-- file, or a failover to a replica, keeps it); a different value than the one a process remembers
-- means the data it knew was lost (stores/process-registry.ts).
-- KEYS: 1 petstore:epoch:{tag} (a tag in one of the master's slots)
-- ARGV: 1 a new random value, set when the marker is missing
-- Returns: the marker's value
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
