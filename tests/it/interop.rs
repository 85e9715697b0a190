//! Interoperability with Redisson's keyspace: limiters written by the test in Redisson's exact
//! format are honoured, older formats decode, and a Lua port of the TRYACQUIRE steps (run by
//! Redis, as Redisson's scripts are) agrees with the module step by step.

use crate::common::*;

/// Adds permit-log members the way Redisson's script does: `struct.pack('Bc0I', #id, id, n)`.
/// ARGV holds triples `score id permits`.
const ADD_MEMBERS: &str = r#"
for i = 1, #ARGV, 3 do
  local id = ARGV[i + 1]
  local member = struct.pack('Bc0I', string.len(id), id, tonumber(ARGV[i + 2]))
  redis.call('zadd', KEYS[1], ARGV[i], member)
end
return redis.call('zcard', KEYS[1])
"#;

/// The TRYACQUIRE steps of SPEC §3 written as a server-side Lua script, the way a Redisson
/// client would run them. KEYS: hash, value, permits. ARGV: now (ms), permits wanted, a member
/// id, and `1` to write or `0` to only look. Replies {acquired 1/0, wait ms (0 when acquired),
/// permits available before the request}.
const LUA_TRY_ACQUIRE: &str = r#"
local rate = tonumber(redis.call('hget', KEYS[1], 'rate'))
local interval = tonumber(redis.call('hget', KEYS[1], 'interval'))
local now = tonumber(ARGV[1])
local wanted = tonumber(ARGV[2])
local write = ARGV[4] == '1'
local cutoff = string.format('%.0f', now - interval)

local function permits_of(member)
  local _, n = struct.unpack('Bc0I', member)
  return n
end
local function total(min, max)
  local sum = 0
  for _, member in ipairs(redis.call('zrangebyscore', KEYS[3], min, max)) do
    sum = sum + permits_of(member)
  end
  return sum
end

-- Steps 1-2: expired permits go back to the value; a missing value, or one that would exceed
-- the rate, is derived from the permits still logged.
local expired_entries = redis.call('zcount', KEYS[3], '-inf', cutoff)
local expired = total('-inf', cutoff)
local live = total('(' .. cutoff, '+inf')
local stored = redis.call('get', KEYS[2])
local available
if stored == false then
  available = rate - live
else
  available = tonumber(stored) + expired
  if available > rate then
    available = rate - live
  end
end
if available < 0 then
  available = 0
end
local before = available
if write and expired_entries > 0 then
  redis.call('zremrangebyscore', KEYS[3], '-inf', cutoff)
end

-- Step 3: take the permits, or find when the oldest live entries free enough of them.
if available >= wanted then
  if write then
    local member = struct.pack('Bc0I', string.len(ARGV[3]), ARGV[3], wanted)
    redis.call('zadd', KEYS[3], ARGV[1], member)
    redis.call('set', KEYS[2], string.format('%d', available - wanted))
  end
  return {1, 0, before}
end
local freed = available
local wait = -1
local entries = redis.call('zrangebyscore', KEYS[3], '(' .. cutoff, '+inf', 'WITHSCORES')
for i = 1, #entries, 2 do
  freed = freed + permits_of(entries[i])
  if freed >= wanted then
    wait = tonumber(entries[i + 1]) + interval - now
    if wait < 1 then
      wait = 1
    end
    break
  end
end
if write then
  redis.call('set', KEYS[2], string.format('%d', available))
end
return {0, wait, before}
"#;

fn add_members(con: &mut Connection, log: &str, entries: &[(i64, &[u8], u32)]) -> i64 {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(ADD_MEMBERS).arg(1).arg(log);
    for (score, id, permits) in entries {
        cmd.arg(*score).arg(*id).arg(*permits);
    }
    cmd.query(con).expect("EVAL add members")
}

/// Runs the Lua port on limiter `name` (OVERALL keys).
fn lua_try_acquire(
    con: &mut Connection,
    name: &str,
    now: i64,
    permits: u32,
    id: &[u8],
    write: bool,
) -> (bool, i64, i64) {
    let reply: Vec<i64> = redis::cmd("EVAL")
        .arg(LUA_TRY_ACQUIRE)
        .arg(3)
        .arg(name)
        .arg(format!("{{{name}}}:value"))
        .arg(format!("{{{name}}}:permits"))
        .arg(now)
        .arg(permits)
        .arg(id)
        .arg(if write { "1" } else { "0" })
        .query(con)
        .expect("EVAL tryAcquire port");
    (reply[0] == 1, reply[1], reply[2])
}

/// The log as sorted (score, permits) pairs, whoever wrote the members.
/// The permits logged per score: what both sides count. The module merges grants of one
/// millisecond into one member, Redisson's script logs one member each.
fn decoded_log(con: &mut Connection, log: &str) -> Vec<(i64, u32)> {
    let mut per_score: std::collections::BTreeMap<i64, u32> = Default::default();
    for (member, score) in log_entries(con, log) {
        *per_score.entry(score).or_default() += member_permits(&member);
    }
    per_score.into_iter().collect()
}

#[test]
fn a_limiter_written_in_redissons_format_is_honoured() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(
        &mut con,
        "HSET lim rate 10 interval 1000 type 0 keepAliveTime 0",
    )
    .unwrap();
    // Three acquisitions by a Redisson client: 2 at T0-900, 3 at T0-500, 1 at T0-100.
    let ids: [&[u8]; 3] = [
        b"AAAAAAAAAAAAAAAA",
        b"BBBBBBBBBBBBBBBB",
        b"CCCCCCCCCCCCCCCC",
    ];
    let count = add_members(
        &mut con,
        "{lim}:permits",
        &[
            (T0 - 900, ids[0], 2),
            (T0 - 500, ids[1], 3),
            (T0 - 100, ids[2], 1),
        ],
    );
    assert_eq!(count, 3);
    line::<()>(&mut con, "SET {lim}:value 4").unwrap();
    let written = log_entries(&mut con, "{lim}:permits");
    assert_eq!(written[0].0.len(), 21, "Redisson's member is 21 bytes");

    assert_eq!(available(&mut con, "lim"), 4);
    // 5 > 4: the 2 permits logged at T0-900 come back at T0+100.
    assert_eq!(try_acquire(&mut con, "lim", 5), Some(100));
    assert_eq!(try_acquire(&mut con, "lim", 4), None);
    assert_eq!(get(&mut con, "{lim}:value").as_deref(), Some("0"));
    assert_eq!(try_acquire(&mut con, "lim", 1), Some(100));

    advance(&mut con, 100);
    // The entry at T0-900 is free now (inclusive bound): counted, not pruned by AVAILABLE.
    assert_eq!(available(&mut con, "lim"), 2);
    assert_eq!(log_entries(&mut con, "{lim}:permits").len(), 4);
    // 2 free now; the 3 logged at T0-500 come back at T0+500.
    assert_eq!(try_acquire(&mut con, "lim", 3), Some(400));
    // The refusal pruned the expired entry and stored its 2 permits back.
    assert_eq!(get(&mut con, "{lim}:value").as_deref(), Some("2"));
    assert_eq!(try_acquire(&mut con, "lim", 2), None);
    let log = log_entries(&mut con, "{lim}:permits");
    let scores: Vec<i64> = log.iter().map(|(_, s)| *s).collect();
    assert_eq!(scores, vec![T0 - 500, T0 - 100, T0, T0 + 100]);
    // Redisson's own members are left byte-for-byte as written.
    assert_eq!(log[0].0, written[1].0);
    assert_eq!(log[1].0, written[2].0);
    let permits: Vec<u32> = log.iter().map(|(m, _)| member_permits(m)).collect();
    assert_eq!(permits, vec![3, 1, 4, 2]);
    assert_eq!(get(&mut con, "{lim}:value").as_deref(), Some("0"));
    // The hash is Redisson's, untouched.
    let hash: Vec<String> = line(&mut con, "HGETALL lim").unwrap();
    assert_eq!(
        hash,
        vec![
            "rate",
            "10",
            "interval",
            "1000",
            "type",
            "0",
            "keepAliveTime",
            "0"
        ]
    );
}

#[test]
fn a_hash_without_keepalivetime_works() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "HSET old rate 5 interval 1000 type 0").unwrap();
    assert_eq!(available(&mut con, "old"), 5);
    assert_eq!(try_acquire(&mut con, "old", 5), None);
    assert_eq!(try_acquire(&mut con, "old", 1), Some(1000));
    let config: Vec<Value> = line(&mut con, "RATELIMIT.CONFIG old").unwrap();
    assert_eq!(
        config,
        vec![
            Value::BulkString(b"rate".to_vec()),
            Value::Int(5),
            Value::BulkString(b"interval".to_vec()),
            Value::Int(1000),
            Value::BulkString(b"type".to_vec()),
            Value::BulkString(b"OVERALL".to_vec()),
            Value::BulkString(b"keepAliveTime".to_vec()),
            Value::Int(0),
        ]
    );
    // keepAliveTime 0: no TTL anywhere, and the field is not added.
    for key in ["old", "{old}:value", "{old}:permits"] {
        assert_eq!(line::<i64>(&mut con, &format!("PTTL {key}")).unwrap(), -1);
    }
    assert_eq!(line::<i64>(&mut con, "HLEN old").unwrap(), 3);
    advance(&mut con, 1000);
    assert_eq!(try_acquire(&mut con, "old", 5), None);
}

#[test]
fn members_with_8_byte_ids_from_older_redisson_decode() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(
        &mut con,
        "HSET legacy rate 10 interval 1000 type 0 keepAliveTime 0",
    )
    .unwrap();
    add_members(
        &mut con,
        "{legacy}:permits",
        &[(T0 - 800, b"12345678", 4), (T0 - 200, b"abcdefgh", 3)],
    );
    line::<()>(&mut con, "SET {legacy}:value 3").unwrap();
    let members = log_entries(&mut con, "{legacy}:permits");
    assert_eq!(members[0].0.len(), 13);
    assert_eq!(available(&mut con, "legacy"), 3);
    assert_eq!(try_acquire(&mut con, "legacy", 7), Some(200));
    advance(&mut con, 200);
    assert_eq!(available(&mut con, "legacy"), 7);
    assert_eq!(try_acquire(&mut con, "legacy", 7), None);
    // The expired 8-byte member was pruned; the live one is intact.
    let log = log_entries(&mut con, "{legacy}:permits");
    assert_eq!(log.len(), 2);
    assert_eq!(log[0], members[1]);
    assert_eq!(member_permits(&log[1].0), 7);
    assert_eq!(try_acquire(&mut con, "legacy", 1), Some(600));
    // With the value gone, the log alone (both id lengths) is summed: 10 - 3 - 7 = 0.
    line::<i64>(&mut con, "DEL {legacy}:value").unwrap();
    assert_eq!(available(&mut con, "legacy"), 0);
}

#[test]
fn a_missing_value_key_still_counts_the_logged_permits() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(
        &mut con,
        "HSET nv rate 10 interval 1000 type 0 keepAliveTime 0",
    )
    .unwrap();
    add_members(
        &mut con,
        "{nv}:permits",
        &[
            (T0 - 1000, b"expired-expired!", 5),
            (T0 - 600, b"live-live-live-1", 4),
            (T0 - 300, b"live-live-live-2", 3),
        ],
    );
    // 7 still logged in the window: 3 available, whatever a missing value would suggest.
    assert_eq!(available(&mut con, "nv"), 3);
    assert_eq!(try_acquire(&mut con, "nv", 4), Some(400));
    assert_eq!(
        get(&mut con, "{nv}:value"),
        None,
        "a refusal does not create the value"
    );
    assert_eq!(decoded_log(&mut con, "{nv}:permits").len(), 2, "pruned");
    assert_eq!(try_acquire(&mut con, "nv", 3), None);
    assert_eq!(get(&mut con, "{nv}:value").as_deref(), Some("0"));
    assert_eq!(
        decoded_log(&mut con, "{nv}:permits"),
        vec![(T0 - 600, 4), (T0 - 300, 3), (T0, 3)]
    );
}

#[test]
fn a_per_client_limiter_in_redissons_format_uses_the_client_keys() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let uuid = "6f1c0e0a-3b7e-4d2a-9c51-0f9e8d7c6b5a";
    line::<i64>(
        &mut con,
        "HSET pcl rate 4 interval 1000 type 1 keepAliveTime 0",
    )
    .unwrap();
    add_members(
        &mut con,
        &format!("{{pcl}}:permits:{uuid}"),
        &[(T0 - 100, b"0123456789abcdef", 3)],
    );
    line::<()>(&mut con, &format!("SET {{pcl}}:value:{uuid} 1")).unwrap();
    let avail: i64 = line(&mut con, &format!("RATELIMIT.AVAILABLE pcl CLIENT {uuid}")).unwrap();
    assert_eq!(avail, 1);
    let reply: Option<i64> = line(
        &mut con,
        &format!("RATELIMIT.TRYACQUIRE pcl 2 CLIENT {uuid}"),
    )
    .unwrap();
    assert_eq!(reply, Some(900));
    // Another client has its own full rate.
    let other: Option<i64> = line(&mut con, "RATELIMIT.TRYACQUIRE pcl 4 CLIENT other").unwrap();
    assert_eq!(other, None);
    assert_eq!(
        get(&mut con, &format!("{{pcl}}:value:{uuid}")).as_deref(),
        Some("1")
    );
    let exists: i64 = line(&mut con, "EXISTS {pcl}:value {pcl}:permits").unwrap();
    assert_eq!(
        exists, 0,
        "a PER_CLIENT limiter never writes the OVERALL keys"
    );
}

/// A small deterministic generator (xorshift64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn a_lua_port_of_tryacquire_agrees_with_the_module_step_by_step() {
    // Three limiters with the same configuration get the same requests at the same clock:
    // `m` only through the module, `l` only through the Lua port, `x` alternately through both.
    // Replies, availability and logs must agree at every step.
    let server = Server::start();
    let mut con = server.conn();
    let mut now = T0;
    set_clock(&mut con, now);
    line::<i64>(&mut con, "RATELIMIT.SETRATE m 10 1000").unwrap();
    line::<i64>(&mut con, "RATELIMIT.SETRATE x 10 1000").unwrap();
    line::<i64>(
        &mut con,
        "HSET l rate 10 interval 1000 type 0 keepAliveTime 0",
    )
    .unwrap();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let (mut granted, mut refused) = (0, 0);
    for step in 0..300u32 {
        let gap = match rng.below(4) {
            0 => 0,
            _ => rng.below(350) as i64,
        };
        if gap > 0 {
            advance(&mut con, gap);
            now += gap;
        }
        let permits = 1 + rng.below(4) as u32;
        let id = format!("lua-id-{step:09}");
        assert_eq!(id.len(), 16);

        let module = try_acquire(&mut con, "m", permits);
        let (lua_ok, lua_wait, lua_before) =
            lua_try_acquire(&mut con, "l", now, permits, id.as_bytes(), true);
        let mixed = if step % 2 == 0 {
            try_acquire(&mut con, "x", permits)
        } else {
            let (ok, wait, _) = lua_try_acquire(&mut con, "x", now, permits, id.as_bytes(), true);
            if ok {
                None
            } else {
                Some(wait)
            }
        };
        let lua = if lua_ok { None } else { Some(lua_wait) };
        assert_eq!(
            module,
            lua,
            "step {step} at +{}: {permits} permits",
            now - T0
        );
        assert_eq!(mixed, module, "step {step}: shared limiter");
        match module {
            None => granted += 1,
            Some(_) => refused += 1,
        }

        // The Lua port reading the module's members sees what the module says is available,
        // and the module reading the Lua members agrees too.
        let (_, _, lua_sees_m) = lua_try_acquire(&mut con, "m", now, 1, b"peek-only-id-000", false);
        let avail = available(&mut con, "m");
        assert_eq!(
            lua_sees_m, avail,
            "step {step}: Lua reading the module's log"
        );
        assert_eq!(
            available(&mut con, "l"),
            avail,
            "step {step}: module reading Lua's log"
        );
        assert_eq!(available(&mut con, "x"), avail, "step {step}");
        assert_eq!(
            lua_before,
            available_before(module, permits, avail),
            "step {step}"
        );
        let log = decoded_log(&mut con, "{m}:permits");
        assert_eq!(decoded_log(&mut con, "{l}:permits"), log, "step {step}");
        assert_eq!(decoded_log(&mut con, "{x}:permits"), log, "step {step}");
        let value = get(&mut con, "{m}:value");
        assert_eq!(get(&mut con, "{l}:value"), value, "step {step}");
        assert_eq!(get(&mut con, "{x}:value"), value, "step {step}");
    }
    assert!(
        granted > 50 && refused > 50,
        "{granted} granted, {refused} refused"
    );
}

/// What was available before a request, given its outcome and what is available after.
fn available_before(outcome: Option<i64>, permits: u32, after: i64) -> i64 {
    match outcome {
        None => after + i64::from(permits),
        Some(_) => after,
    }
}
