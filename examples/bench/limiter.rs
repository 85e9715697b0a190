//! The limiters measured: their keys in Redisson's layout, a full window loaded directly (no
//! acquisitions), the checks that it stayed full, and their memory.

use redis::Connection;

use crate::Res;

/// The client id in the script's per-client key names (unused: the limiters are OVERALL).
const CLIENT: &str = "bench";

/// The five keys Redisson passes to its script, for an OVERALL limiter named `name`.
pub fn keys(name: &str) -> [String; 5] {
    [
        name.to_string(),
        format!("{{{name}}}:value"),
        format!("{{{name}}}:value:{CLIENT}"),
        format!("{{{name}}}:permits"),
        format!("{{{name}}}:permits:{CLIENT}"),
    ]
}

/// Random ids for log members (deterministic, so runs are repeatable).
pub struct Ids(u64);

impl Ids {
    pub fn new(seed: u64) -> Self {
        Ids(seed)
    }
    /// splitmix64
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn id(&mut self) -> [u8; 16] {
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&self.next_u64().to_le_bytes());
        id[8..].copy_from_slice(&self.next_u64().to_le_bytes());
        id
    }
    /// A 21-byte log member: 0x10, 16 id bytes, permits as u32 little-endian.
    pub fn member(&mut self, permits: u32) -> [u8; 21] {
        let mut m = [0u8; 21];
        m[0] = 16;
        m[1..17].copy_from_slice(&self.id());
        m[17..].copy_from_slice(&permits.to_le_bytes());
        m
    }
}

/// Creates limiter `name` with rate = `window` permits per `window` ms and a full window at
/// `now`: `window` entries of 1 permit scored `now - window + 1 ..= now` (1 ms apart), value 0.
/// Filled with pipelined ZADDs rather than `window` acquisitions.
pub fn fill_window(
    con: &mut Connection,
    name: &str,
    window: i64,
    now: i64,
    ids: &mut Ids,
) -> Res<()> {
    let [hash, value, _, permits, _] = keys(name);
    let _: () = redis::cmd("DEL")
        .arg(&hash)
        .arg(&value)
        .arg(&permits)
        .query(con)?;
    let _: i64 = redis::cmd("RATELIMIT.SETRATE")
        .arg(&hash)
        .arg(window)
        .arg(window)
        .query(con)?;
    const PER_ZADD: i64 = 1_000;
    const ZADDS_PER_TRIP: i64 = 50;
    let mut score = now - window + 1;
    while score <= now {
        let mut pipe = redis::pipe();
        for _ in 0..ZADDS_PER_TRIP {
            if score > now {
                break;
            }
            let cmd = pipe.cmd("ZADD").arg(&permits);
            let end = (score + PER_ZADD - 1).min(now);
            for s in score..=end {
                cmd.arg(s).arg(&ids.member(1)[..]);
            }
            score = end + 1;
            cmd.ignore();
        }
        let _: () = pipe.query(con)?;
    }
    let _: () = redis::cmd("SET").arg(&value).arg(0).query(con)?;
    check_steady(con, name, window)
}

/// The window is full: `window` entries logged and a value of 0.
pub fn check_steady(con: &mut Connection, name: &str, window: i64) -> Res<()> {
    let [_, value, _, permits, _] = keys(name);
    let logged: i64 = redis::cmd("ZCARD").arg(&permits).query(con)?;
    let stored: Option<String> = redis::cmd("GET").arg(&value).query(con)?;
    if logged != window || stored.as_deref() != Some("0") {
        return Err(format!(
            "{name}: expected a full window ({window} logged, value 0), found {logged} logged, value {stored:?}"
        )
        .into());
    }
    Ok(())
}

pub fn delete(con: &mut Connection, name: &str) -> Res<()> {
    let [hash, value, _, permits, _] = keys(name);
    // DEL, not UNLINK: freeing a 1M-entry zset on the lazyfree thread would compete for the
    // CPU with the next measurement.
    let _: () = redis::cmd("DEL")
        .arg(hash)
        .arg(value)
        .arg(permits)
        .query(con)?;
    Ok(())
}

pub fn set_clock(con: &mut Connection, ms: i64) -> Res<()> {
    let _: () = redis::cmd("RATELIMIT.DEBUG")
        .arg("SETCLOCK")
        .arg(ms)
        .query(con)?;
    Ok(())
}

#[derive(Default)]
pub struct Memory {
    pub hash: i64,
    pub value: i64,
    pub permits: i64,
    pub encoding: String,
}

impl Memory {
    pub fn total(&self) -> i64 {
        self.hash + self.value + self.permits
    }
}

/// MEMORY USAGE (exact: SAMPLES 0) of one key; None if it is missing.
pub fn memory_usage(con: &mut Connection, key: &str) -> Res<Option<i64>> {
    Ok(redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .arg("SAMPLES")
        .arg(0)
        .query(con)?)
}

/// The server's `used_memory` (INFO memory), bytes.
pub fn used_memory(con: &mut Connection) -> Res<i64> {
    let info: String = redis::cmd("INFO").arg("memory").query(con)?;
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .ok_or("no used_memory in INFO memory")?
        .trim()
        .parse::<i64>()
        .map_err(|e| e.into())
}

/// MEMORY USAGE (exact: SAMPLES 0) of the limiter's three keys (0 for one that is missing).
pub fn memory(con: &mut Connection, name: &str) -> Res<Memory> {
    let [hash, value, _, permits, _] = keys(name);
    let mut usage = |key: &str| -> Res<i64> { Ok(memory_usage(con, key)?.unwrap_or(0)) };
    Ok(Memory {
        hash: usage(&hash)?,
        value: usage(&value)?,
        permits: usage(&permits)?,
        encoding: redis::cmd("OBJECT")
            .arg("ENCODING")
            .arg(&permits)
            .query(con)?,
    })
}
