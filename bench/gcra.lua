-- GCRA as a Lua script, the way go-redis/redis_rate and valkey-go's limiter run it: the
-- contender of the module's GCRA command in `make bench` (bench/README.md, "GCRA").
-- The same arithmetic as Redis's GCRA command: microseconds from the server's TIME, the
-- theoretical arrival time (TAT) in one string key expiring when the bucket is full again, and
-- the same five-integer reply. Written only when allowed.
--
-- KEYS[1] the limiter's key; ARGV: max_burst, tokens_per_period, period (seconds), tokens.
local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local tokens = tonumber(ARGV[4])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local emission = math.max(1, math.floor(period * 1000000 / rate + 0.5))
local tolerance = emission * (burst + 1)
local increment = emission * tokens
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then
  tat = now
end
local new_tat = tat + increment
local diff = now - (new_tat - tolerance)
local limited, retry, ttl = 0, -1, 0
if diff < 0 then
  limited = 1
  if increment <= tolerance then
    retry = math.ceil(-diff / 1000000)
  end
  ttl = tat - now
else
  ttl = new_tat - now
  redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PXAT',
    string.format('%.0f', math.max(math.floor(new_tat / 1000), math.floor(now / 1000) + 1)))
end
local remaining = 0
if tolerance - ttl > -emission then
  remaining = math.floor((tolerance - ttl) / emission)
end
return {limited, burst + 1, remaining, retry, math.ceil(ttl / 1000000)}
