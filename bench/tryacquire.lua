-- The benchmark's baseline: this project's Lua port of the tryAcquire script that Redisson's
-- RRateLimiter (org.redisson.RedissonRateLimiter#tryAcquireAsync) sends with EVAL. It makes the
-- same Redis calls, in the same order, on the same keys and bytes, so the benchmark compares the
-- module with what a Redisson client makes the server do today.
--
-- KEYS[1] limiter hash     KEYS[2] {N}:value     KEYS[3] {N}:value:<client>
-- KEYS[4] {N}:permits      KEYS[5] {N}:permits:<client>
-- ARGV[1] permits   ARGV[2] now (unix ms, the caller's clock)   ARGV[3] random id (16 bytes)
--
-- Reply: nil when the permits were acquired, else the milliseconds to wait (Redisson's formula).

local rate = redis.call('hget', KEYS[1], 'rate')
local interval = redis.call('hget', KEYS[1], 'interval')
local kind = redis.call('hget', KEYS[1], 'type')
assert(rate ~= false and interval ~= false and kind ~= false, 'RateLimiter is not initialized')

local valueKey, permitsKey = KEYS[2], KEYS[4]
if kind == '1' then
    valueKey, permitsKey = KEYS[3], KEYS[5]
end

local wanted = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
assert(tonumber(rate) >= wanted, 'Requested permits amount cannot exceed defined rate')

-- One log member: length byte, id, permits as a 32-bit little-endian unsigned integer.
local function entry()
    return struct.pack('Bc0I', string.len(ARGV[3]), ARGV[3], ARGV[1])
end

local value = redis.call('get', valueKey)
local result
if value == false then
    -- First use (or the value expired): a full bucket.
    redis.call('set', valueKey, rate)
    redis.call('zadd', permitsKey, ARGV[2], entry())
    redis.call('decrby', valueKey, ARGV[1])
else
    -- Give back the permits of the entries that left the window.
    local expired = redis.call('zrangebyscore', permitsKey, 0, now - interval)
    local freed = 0
    for _, member in ipairs(expired) do
        local _, permits = struct.unpack('Bc0I', member)
        freed = freed + permits
    end
    if freed > 0 then
        redis.call('zremrangebyscore', permitsKey, 0, now - interval)
        if tonumber(value) + freed > tonumber(rate) then
            -- More than the rate: recount what is still logged.
            local used = 0
            for _, member in ipairs(redis.call('zrange', permitsKey, 0, -1)) do
                local _, permits = struct.unpack('Bc0I', member)
                used = used + permits
            end
            value = tonumber(rate) - used
        else
            value = tonumber(value) + freed
        end
        redis.call('set', valueKey, value)
    end

    if tonumber(value) < wanted then
        local oldest = redis.call('zrange', permitsKey, 0, 0, 'withscores')
        result = 3 + interval - (now - tonumber(oldest[2]))
    else
        redis.call('zadd', permitsKey, ARGV[2], entry())
        redis.call('decrby', valueKey, ARGV[1])
    end
end

-- TTL: refresh the keep-alive on all three keys, or give the state keys the hash's TTL.
local keepAlive = redis.call('hget', KEYS[1], 'keepAliveTime')
if keepAlive ~= false and tonumber(keepAlive) > 0 then
    redis.call('pexpire', KEYS[1], keepAlive)
    redis.call('pexpire', valueKey, keepAlive)
    redis.call('pexpire', permitsKey, keepAlive)
else
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then
        redis.call('pexpire', valueKey, ttl)
        redis.call('pexpire', permitsKey, ttl)
    end
end
return result
