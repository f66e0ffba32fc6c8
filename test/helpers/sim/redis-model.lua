-- The simulator's keyspace and `redis.call`, inside the Lua VM that runs the limiter's scripts
-- (sim/redis-model.ts drives it). One keyspace per simulated Redis; a key holds a hash or a string
-- and an expiry (Unix ms, Redis time). Only the commands the scripts call are modelled, as Redis 7
-- answers them: a missing field or key reads as false, numbers passed as arguments are stored as
-- their decimal digits, replies are integers (truncated), strings, or lists of them.
local SPACES, SCRIPTS = {}, {}
local data, now = nil, 0

local function live (key)
  local e = data[key]
  if e ~= nil and e.x ~= nil and e.x <= now then
    data[key] = nil
    return nil
  end
  return e
end

-- What Redis stores for an argument: numbers as their shortest decimal (integral ones as integers).
local function arg (v)
  if type(v) == 'number' then
    if v == math.floor(v) and math.abs(v) < 2 ^ 53 then return string.format('%d', v) end
    return string.format('%.17g', v)
  end
  return v
end

-- One handler per command, looked up by the name as the script spells it (upper-cased only when it is not
-- found as written): redis.call is the model's hottest path, a ring's HMGET reads 61 or 97 fields.
local COMMANDS = {
  TIME = function ()
    return { string.format('%d', math.floor(now / 1000)), string.format('%d', math.floor((now % 1000) * 1000)) }
  end,
  HMGET = function (key, ...)
    local a = { ... }
    local e = live(key)
    local h, out = e and e.h, {}
    for i = 1, #a do
      local v = false
      if h then
        local field = a[i]
        if type(field) == 'number' then field = arg(field) end
        v = h[field]
        if v == nil then v = false end
      end
      out[i] = v
    end
    return out
  end,
  HGET = function (key, field)
    local e = live(key)
    local v = e and e.h and e.h[arg(field)]
    if v == nil then return false end
    return v
  end,
  HSET = function (key, ...)
    local a = { ... }
    local e = live(key)
    if e == nil or e.h == nil then
      e = { h = {} }
      data[key] = e
    end
    for i = 1, #a, 2 do e.h[arg(a[i])] = arg(a[i + 1]) end
    return 0
  end,
  HDEL = function (key, ...)
    local a = { ... }
    local e = live(key)
    if e and e.h then for i = 1, #a do e.h[arg(a[i])] = nil end end
    return 0
  end,
  PEXPIREAT = function (key, at)
    local e = live(key)
    if e == nil then return 0 end
    e.x = tonumber(arg(at))
    return 1
  end,
  GET = function (key)
    local e = live(key)
    if e == nil or e.v == nil then return false end
    return e.v
  end,
  SET = function (key, value)
    data[key] = { v = arg(value) }
    return 'OK'
  end,
  DEL = function (key)
    local had = live(key) ~= nil
    data[key] = nil
    return had and 1 or 0
  end
}

redis = {
  call = function (cmd, ...)
    local run = COMMANDS[cmd]
    if run == nil then
      cmd = string.upper(cmd)
      run = COMMANDS[cmd]
      if run == nil then error('redis.call ' .. cmd .. ' is not modelled') end
    end
    return run(...)
  end
}

-- Replies travel to JavaScript as one string: items joined by \31, 'n<integer>', 's<string>', or
-- 'l<count>' followed by the list's items.
local floor, ceil, integer = math.floor, math.ceil, math.type

local function encode (v, out, n)
  if type(v) == 'table' then
    n = n + 1
    out[n] = 'l' .. #v
    for i = 1, #v do n = encode(v[i], out, n) end
    return n
  end
  n = n + 1
  if type(v) == 'number' then
    -- Truncated toward zero; an integer's '..' is its %d text (a float too large for one keeps %d's error).
    local whole = v < 0 and ceil(v) or floor(v)
    out[n] = integer(whole) == 'integer' and 'n' .. whole or 'n' .. string.format('%d', whole)
  elseif v == false or v == nil then
    out[n] = 's'
  else
    out[n] = 's' .. v
  end
  return n
end

local function split (s)
  local out = {}
  for p in string.gmatch(s, '([^\31]*)\31') do out[#out + 1] = p end
  return out
end

function reset (space)
  SPACES[space] = {}
  return ''
end

function define (sha, source)
  SCRIPTS[sha] = assert(load('local KEYS, ARGV = ...\nlocal unpack = table.unpack\n' .. source, sha))
  return ''
end

function run (space, at, sha, keys, args)
  data, now = SPACES[space], tonumber(at)
  local out = {}
  encode(SCRIPTS[sha](split(keys), split(args)), out, 0)
  return table.concat(out, '\31')
end

function peek (space, at, key, field)
  data, now = SPACES[space], tonumber(at)
  local e = live(key)
  local v
  if field == '' then v = e and e.v else v = e and e.h and e.h[field] end
  if v == nil then return '' end
  return 's' .. v
end

function set (space, key, value)
  SPACES[space][key] = { v = value }
  return ''
end

local function deepcopy (v)
  if type(v) ~= 'table' then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = deepcopy(x) end
  return out
end

-- A replica's copy: `to` becomes what `from` holds now (a failover to it loses what `from` wrote after).
function copy (from, to)
  SPACES[to] = deepcopy(SPACES[from])
  return ''
end

-- A slot migration: `key` (with its expiry) moves from one node's keyspace to another's.
function move (from, to, key)
  SPACES[to][key] = SPACES[from][key]
  SPACES[from][key] = nil
  return ''
end

-- A keyspace as text, keys and fields in order with their expiries (two keyspaces compared: bench/grant-equivalence.ts).
function dump (space, at)
  data, now = SPACES[space], tonumber(at)
  local keys, out = {}, {}
  for key in pairs(data) do if live(key) then keys[#keys + 1] = key end end
  table.sort(keys)
  for _, key in ipairs(keys) do
    local e = data[key]
    out[#out + 1] = key .. ' x=' .. tostring(e.x)
    if e.v ~= nil then out[#out + 1] = '  =' .. e.v end
    if e.h ~= nil then
      local fields = {}
      for field in pairs(e.h) do fields[#fields + 1] = field end
      table.sort(fields)
      for _, field in ipairs(fields) do out[#out + 1] = '  ' .. field .. '=' .. e.h[field] end
    end
  end
  return table.concat(out, '\n')
end
