-- ratelimit's counters for redis_exporter's -script hook: returns metric/value pairs, read-only.
--
-- redis_exporter (1.45, Debian bookworm's) reads `INFO ALL`, which leaves out modules' sections, and
-- has no flag to add them. Run it with `-script /path/to/ratelimit.lua`: it EVALs this script at
-- each scrape and exports each pair as `redis_script_values{key="<first>"} <second>`.
-- prometheus.yml's metric_relabel_configs (monitoring/prometheus.yml) then turn each key into a
-- metric of its own, with the group or the limiter's name as a label:
--
--   ratelimit_<counter>_total            INFO ratelimit_stats counters (acquired, refused, ...)
--   ratelimit_<gauge>                    INFO ratelimit_stats gauges (blocked_clients, tickets, ...)
--   ratelimit_group_grants_total:<g>     RATELIMIT.STATS, per group; `_overflow` for the groups
--   ratelimit_group_refusals_total:<g>     past the module's first 256 (at most 257 groups, so at
--   ratelimit_group_near_limit_total:<g>   most 771 series per server)
--   ratelimit_top_refused:<name>         RATELIMIT.TOPREFUSED 10: refusals of the ten most-refused
--                                        limiters over the last one to two minutes (a gauge)
--
-- A byte of a group or a name other than printable ASCII, and `%`, is written %XX, so every
-- label is valid UTF-8 (names are cut at 128 and 200 bytes by the module, maybe mid-character).
local TOP_REFUSED = 10

local out = {}
local function add(key, value)
    out[#out + 1] = key
    out[#out + 1] = tostring(value)
end

local function escape(s)
    return (string.gsub(s, '[^\32-\36\38-\126]', function(c)
        return string.format('%%%02X', string.byte(c))
    end))
end

-- Counters only grow (until CONFIG RESETSTAT); the gauges say how things stand now.
local GAUGES = {
    blocked_clients = true, tickets = true, configs_kept = true, configs_in_use = true,
    counting = true, overflow_groups = true,
}
local info = redis.call('INFO', 'ratelimit_stats')
for field, value in string.gmatch(info, 'ratelimit_([%w_]+):(%d+)') do
    if GAUGES[field] then
        add('ratelimit_' .. field, value)
    else
        add('ratelimit_' .. field .. '_total', value)
    end
end

-- RATELIMIT.STATS in RESP2: stats, 1|0, groups, [name, [grants, n, refusals, n, near_limit, n], ...],
-- overflow, [grants, n, ...], overflow_groups, n.
local function add_group(group, counts)
    for i = 1, #counts, 2 do
        add('ratelimit_group_' .. counts[i] .. '_total:' .. escape(group), counts[i + 1])
    end
end
local stats = redis.call('RATELIMIT.STATS')
for i = 1, #stats, 2 do
    local field, value = stats[i], stats[i + 1]
    if field == 'stats' then
        add('ratelimit_counting', value)
    elseif field == 'groups' then
        for j = 1, #value, 2 do
            add_group(value[j], value[j + 1])
        end
    elseif field == 'overflow' then
        add_group('_overflow', value)
    elseif field == 'overflow_groups' then
        add('ratelimit_overflow_groups', value)
    end
end

local top = redis.call('RATELIMIT.TOPREFUSED', TOP_REFUSED)
for i = 1, #top, 2 do
    add('ratelimit_top_refused:' .. escape(top[i]), top[i + 1])
end

return out
